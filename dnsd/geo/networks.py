"""Longest-prefix match over the operator's `client_networks`, compiled once per load."""

from __future__ import annotations

import ipaddress
from typing import Protocol


class ClientNetwork(Protocol):
    """What a placed network offers (dnsd.config.model.ClientNetwork is one): geo sits
    below the config, so it names the shape rather than importing the class."""

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network: ...

    @property
    def region(self) -> str: ...

    @property
    def country(self) -> str | None: ...


class NetworkTable:
    """Longest-prefix match over `client_networks`: one dictionary per prefix length, asked
    from the longest length down, so a look-up costs one masking per length in use."""

    __slots__ = ("_by_length",)

    def __init__(self, entries: tuple[ClientNetwork, ...]) -> None:
        by_length: dict[tuple[int, int], dict[int, ClientNetwork]] = {}
        for entry in entries:
            net = entry.network
            by_length.setdefault((net.version, net.prefixlen), {})[int(net.network_address)] = entry
        self._by_length = tuple(
            (version, _mask(version, length), table)
            for (version, length), table in sorted(by_length.items(), key=lambda kv: -kv[0][1])
        )

    def match(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ClientNetwork | None:
        value, version = int(address), address.version
        for net_version, mask, table in self._by_length:
            if net_version == version:
                hit = table.get(value & mask)
                if hit is not None:
                    return hit
        return None


def _mask(version: int, length: int) -> int:
    bits = 32 if version == 4 else 128
    return ((1 << length) - 1) << (bits - length)
