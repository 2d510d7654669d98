"""Types of the optional compiled serving loop (dnsd/_fastloop.c)."""

from collections.abc import Callable
from typing import Any

# (code, value, order): dnsd.answer_table's walk result
Walked = tuple[int, int, tuple[int, ...] | None]

MAX_PROXY_NETS: int

def walk(table: bytes, address: bytes, rng: Any) -> Walked: ...

class Batch:
    queued: int
    tap_dropped: int
    def __init__(self, fd: int, ipv4: bool, size: int = 64) -> None: ...
    def receive(self) -> int: ...
    def datagram(self, i: int) -> bytes | None: ...
    def unwrap(self, i: int, skip: int, address: bytes) -> None: ...
    def proxy_from(self, networks: list[tuple[bytes, int]]) -> None: ...
    def carried_host(self, i: int) -> str | None: ...
    def source(self, i: int) -> tuple[str, int]: ...
    def source_key(self, i: int) -> int | bytes: ...
    def queue(self, i: int, reply: bytes) -> None: ...
    def flush(self) -> int: ...
    def answer_hits(
        self,
        tables: dict[bytes, bytes],
        rng: Any,
        counters: Any,
        limit: Callable[[bytes, Any, bytes], bytes | None] | None,
        clients: dict[Any, Any],
        # dnsd.zone_tables.Tables.for_c(): the packed nodes' records and slots, the counts,
        # the counted types, the templates
        zones: tuple[bytes, bytes, dict[bytes, int], bytes, dict[int, list[bytes]]] | None = None,
        policies: list[bytes] | None = None,
        classes: tuple[dict[bytes, bytes], dict[bytes, bytes], dict[bytes, int]] | None = None,
    ) -> tuple[list[tuple[int, Walked]], int, int]: ...
    def tap(
        self,
        head: bytes,
        tail: bytes,
        server: bytes,
        server_port: int,
        every: int,
        kinds: int,
        capacity: int,
    ) -> None: ...
    def take_taps(self) -> tuple[bytes, int]: ...
