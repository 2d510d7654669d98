"""octoDNS support: `class: dnsd.octodns.DnsdProvider` (needs `pip install dnsd[octodns]`)."""

from dnsd.octodns.provider import DnsdProvider

__all__ = ["DnsdProvider"]
