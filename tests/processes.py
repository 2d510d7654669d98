"""`dnsd serve` as a real process for end-to-end tests (the drill runner's own class)."""

from dnsd.drill.process import DnsdProcess

__all__ = ["DnsdProcess"]
