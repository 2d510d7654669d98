"""Steering: choose a pool and its backends for a load-balanced name (steering.md)."""

from dnsd.steering.select import LbAnswer, answer_load_balancer

__all__ = ["LbAnswer", "answer_load_balancer"]
