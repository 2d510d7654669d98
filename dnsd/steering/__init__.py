"""Steering: choose a pool and its backends for a load-balanced name (docs/steering.md)."""

from dnsd.steering.client import ClientInfo
from dnsd.steering.decision import LbDecision
from dnsd.steering.inputs import SteeringInputs
from dnsd.steering.select import POLICIES, steer

__all__ = ["POLICIES", "ClientInfo", "LbDecision", "SteeringInputs", "steer"]
