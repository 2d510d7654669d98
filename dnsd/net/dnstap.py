"""dnstap: every answered query (or one in N) as the standard dnstap protobuf messages
AUTH_QUERY and AUTH_RESPONSE, in Frame Streams, to a file (dnstap-read, kdig -G) or to a
bidirectional Unix socket reader (fstrm_capture, `dnstap -u`).

The serving loops only append a tuple to a bounded queue (`DnstapWriter.put`): encoding,
framing and writing happen in the writer's own thread, so a slow or absent reader never
slows an answer. A full queue drops the new entry and counts it
(`dnsd_dnstap_dropped_total`); a lost socket reader is connected again with back-off while
the queue keeps what it can hold. The compiled UDP loop keeps the frames of the answers it
gives in a bounded buffer of its own (dnsd/_fastloop.c: the protobuf library's encoding in
Python costs ten times what answering does), which the writer's thread takes (`add_source`,
`_drain`); the parts of those frames that are not packets, addresses or times —
identity, version, a decision's `policy` — are encoded here, by the protobuf library
(`frame_parts`, `policy_field`).

The protobuf classes are the generated ones of the dnstap schema (PyPI dnstap-pb, the
`dnstap` extra). Frame Streams is only a framing (a length before each frame, and five
small control frames), written here: READY/ACCEPT/START on connect, STOP/FINISH on close,
START/STOP around a file.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily

from dnsd.ratelog import RateLimitedLog

log = logging.getLogger("dnsd.dnstap")
FAILURE_LOG = RateLimitedLog(log)

MESSAGES = ("auth_query", "auth_response", "update_query", "update_response")
CONTENT_TYPE = b"protobuf:dnstap.Dnstap"
QUEUE_MAX = 10_000  # queries waiting for the writer; past it they are dropped and counted
QUEUE_BYTES = 16 << 20  # and their messages' bytes (TCP ones reach 64 KiB): memory stays bounded
SOURCE_BYTES = 4 << 20  # a compiled loop's buffer of frames (about 17,000 answers)
SOURCE_POLL_S = 0.02  # how often the writer takes the compiled loops' frames
VERSION = b"dnsd"
# Frame Streams control frames (https://farsightsec.github.io/fstrm/)
ACCEPT, START, STOP, READY, FINISH = 1, 2, 3, 4, 5
FIELD_CONTENT_TYPE = 1
MAX_CONTROL = 512  # a reader's control frame is tiny: a longer one is refused
HANDSHAKE_TIMEOUT_S = 2.0
SEND_TIMEOUT_S = 5.0  # a reader that stops reading: dropped and connected again
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.2, 30.0


@dataclass(frozen=True, slots=True)
class DnstapSettings:
    socket: str | None = None  # a Frame Streams reader's Unix socket, or
    file: str | None = None  # a Frame Streams file (replaced when the server starts)
    identity: str = ""  # default: the host name
    messages: frozenset[str] = frozenset(MESSAGES)
    sample: int = 1  # one query in N
    queue: int = QUEUE_MAX
    queue_bytes: int = QUEUE_BYTES

    @property
    def enabled(self) -> bool:
        return bool(self.socket or self.file)


def settings_from(
    socket_path: str | None,
    file: str | None,
    identity: str | None,
    sample: int,
    messages: list[str] | tuple[str, ...] | None = None,
) -> DnstapSettings:
    """Checked settings from the flags (and the server file's `messages`); ValueError with
    a message naming the flag when they cannot work."""
    if socket_path and file:
        raise ValueError("--dnstap-socket and --dnstap-file: give one of them")
    if not 1 <= sample <= 1_000_000:
        raise ValueError("--dnstap-sample: a whole number from 1 to 1000000")
    if identity is not None and len(identity.encode()) > 255:
        raise ValueError("--dnstap-identity: at most 255 bytes")
    chosen = frozenset(messages) if messages is not None else frozenset(MESSAGES)
    if unknown := sorted(chosen - set(MESSAGES)):
        raise ValueError(f"dnstap.messages: {unknown[0]!r} is not one of {', '.join(MESSAGES)}")
    if (socket_path or file) and not chosen:
        raise ValueError("dnstap.messages: name at least one")
    if socket_path or file:
        try:
            import dnstap_pb  # noqa: F401
        except ImportError:
            raise ValueError(
                "dnstap needs the dnstap-pb package: pip install 'dnsd[dnstap]'"
            ) from None
    return DnstapSettings(
        socket_path or None,
        file or None,
        identity if identity is not None else socket.gethostname(),
        chosen,
        sample,
    )


def control(kind: int, content_type: bytes | None = CONTENT_TYPE) -> bytes:
    """A Frame Streams control frame: escape (0), its length, its type, the content type."""
    body = struct.pack("!I", kind)
    if content_type is not None:
        body += struct.pack("!II", FIELD_CONTENT_TYPE, len(content_type)) + content_type
    return struct.pack("!II", 0, len(body)) + body


def read_control(sock: socket.socket) -> tuple[int, list[bytes]]:
    """One control frame from a reader: its type and content types (bounded)."""
    head = _read_exactly(sock, 8)
    escape, length = struct.unpack("!II", head)
    if escape != 0 or not 4 <= length <= MAX_CONTROL:
        raise OSError("not a Frame Streams control frame")
    body = _read_exactly(sock, length)
    (kind,) = struct.unpack("!I", body[:4])
    types, rest = [], body[4:]
    while len(rest) >= 8:
        field, size = struct.unpack("!II", rest[:8])
        if field != FIELD_CONTENT_TYPE or size > len(rest) - 8:
            raise OSError("a bad Frame Streams control field")
        types.append(rest[8 : 8 + size])
        rest = rest[8 + size :]
    return kind, types


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("the reader closed the connection")
        data += chunk
    return data


# What a serving loop hands over per query: (query, reply, client address, client port,
# server address, server port, "udp"|"tcp", query time, response time, decision or None).
# The decision: (load balancer, pool, client region).
Entry = tuple[bytes, bytes | None, Any, int, str, int, str, float, float, Any]


class DnstapWriter:
    def __init__(self, settings: DnstapSettings) -> None:
        self.settings = settings
        self._queue: deque[Entry] = deque()
        self._max = settings.queue
        self._max_bytes = settings.queue_bytes
        self._bytes = 0  # the queued messages' bytes (under _lock: several loops put)
        self._lock = threading.Lock()  # held for an addition, never across I/O
        self._wake = threading.Event()  # entries are waiting (or the server stops)
        self._halt = threading.Event()  # the server stops: cuts a back-off short
        self._stopping = False
        self._every = settings.sample
        self._seen = 0
        self.dropped = 0  # entries the full queue refused
        self.written = 0  # dnstap messages written
        self.connects = 0  # successful connections to the socket reader
        self._out: Any = None  # the open file or socket
        # The compiled loops' frame buffers (dnsd._fastloop.Batch: take_taps, tap_dropped),
        # the drops of those gone, and frames taken from them not yet written: (frames,
        # how many).
        self._sources: list[Any] = []
        self._sources_dropped = 0
        self._taken: deque[tuple[bytes, int]] = deque()
        self._thread = threading.Thread(target=self._run, name="dnsd dnstap", daemon=True)

    # -- the serving loops' side: never blocks ---------------------------------------------
    def sampled(self) -> bool:
        """Whether this query is one of the N logged (--dnstap-sample)."""
        if self._every == 1:
            return True
        self._seen += 1
        return self._seen % self._every == 0

    def put(self, entry: Entry) -> None:
        size = len(entry[0]) + len(entry[1] or b"")
        with self._lock:
            if len(self._queue) >= self._max or self._bytes + size > self._max_bytes:
                self.dropped += 1
                return
            self._bytes += size
            self._queue.append(entry)
        if not self._wake.is_set():
            self._wake.set()

    # -- the compiled loops' frames ---------------------------------------------------------
    def frame_parts(self) -> tuple[bytes, bytes]:
        """A Dnstap frame's fields before and after its `message`, as the protobuf library
        encodes them (identity and version; type MESSAGE): the compiled loop puts its
        Message between them."""
        pb = _dnstap_pb()
        identity, version = self.settings.identity.encode(), VERSION
        head = pb.Dnstap(identity=identity, version=version).SerializePartialToString()
        return head, pb.Dnstap(type=pb.Dnstap.MESSAGE).SerializePartialToString()

    def kinds(self) -> int:
        """Which messages of an answered query the compiled loop writes: 1 AUTH_QUERY,
        2 AUTH_RESPONSE (it sends no UPDATEs: they go to the event loop)."""
        wanted = self.settings.messages
        return ("auth_query" in wanted) | ("auth_response" in wanted) << 1

    def add_source(self, source: Any) -> None:
        """A compiled loop's frame buffer, taken by the writer's thread until removed."""
        with self._lock:
            self._sources = [*self._sources, source]
        self._wake.set()

    def remove_source(self, source: Any) -> None:
        """The loop is done with it: its last frames are taken, its drops kept."""
        with self._lock:
            self._sources = [s for s in self._sources if s is not source]
            self._sources_dropped += source.tap_dropped
            self._taken.append(source.take_taps())
        self._wake.set()

    def policy_field(self, decision: tuple[str, str, str]) -> bytes:
        """A load-balanced answer's `Message.policy` (its tag and length first), encoded by
        the protobuf library: what the compiled loop appends to its response message."""
        message = _dnstap_pb().Message()
        _set_policy(message, decision)
        return message.SerializePartialToString()

    def collect(self) -> Iterator[CounterMetricFamily]:
        """Its Prometheus collector (Metrics.register)."""
        dropped = CounterMetricFamily(
            "dnsd_dnstap_dropped",
            "dnstap messages dropped: the writer's queue or a compiled loop's buffer was full",
        )
        sources = self._sources
        dropped.add_metric(
            [], self.dropped + self._sources_dropped + sum(s.tap_dropped for s in sources)
        )
        yield dropped

    # -- the writer thread -------------------------------------------------------------------
    def start(self) -> None:
        import dnstap_pb

        self._pb = dnstap_pb
        if self.settings.file:
            # A file is one stream: START, the frames, STOP. Opened now so a bad path fails
            # at start, not silently later.
            self._out = open(self.settings.file, "wb")  # noqa: SIM115 (closed by stop)
            self._out.write(control(START))
        self._thread.start()

    def stop(self) -> None:
        """Write what is queued, end the stream (STOP; FINISH from a socket reader)."""
        self._stopping = True
        self._halt.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while True:
            if self.settings.socket and self._out is None and not self._connect():
                if self._stopping:
                    return
                self._halt.wait(backoff)  # the queue fills meanwhile; past the cap it drops
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_MIN_S
            self._wake.wait(SOURCE_POLL_S if self._sources else 0.5)
            self._wake.clear()
            try:
                self._drain()
            except OSError as exc:
                self._close(clean=False)
                if self.settings.file:  # a file that cannot be written: nothing more to do
                    log.error(
                        "dnstap: cannot write %s (%s): dnstap stops; queries are "
                        "dropped and counted",
                        self.settings.file,
                        exc,
                    )
                    return
                FAILURE_LOG.log(
                    time.monotonic(),
                    logging.WARNING,
                    "dnstap: the reader at %s went away (%s): connecting again",
                    self.settings.socket,
                    exc,
                )
                continue
            if self._stopping and not self._queue and not self._taken:
                self._close(clean=True)
                return

    def _connect(self) -> bool:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            sock.connect(str(self.settings.socket))
            sock.sendall(control(READY))
            kind, types = read_control(sock)
            if kind != ACCEPT or CONTENT_TYPE not in types:
                raise OSError("the reader did not accept protobuf:dnstap.Dnstap")
            sock.sendall(control(START))
            sock.settimeout(SEND_TIMEOUT_S)
        except OSError as exc:
            sock.close()
            log.debug("dnstap: cannot connect to %s: %s", self.settings.socket, exc)
            return False
        self.connects += 1
        log.info("dnstap: writing to the reader at %s", self.settings.socket)
        self._out = sock
        return True

    def _close(self, clean: bool) -> None:
        out, self._out = self._out, None
        if out is None:
            return
        with contextlib.suppress(OSError):
            if isinstance(out, socket.socket):
                if clean:
                    out.sendall(control(STOP, None))
                    out.settimeout(HANDSHAKE_TIMEOUT_S)
                    read_control(out)  # FINISH
            elif clean:
                out.write(control(STOP, None))
        with contextlib.suppress(OSError):
            out.close()

    def _drain(self) -> None:
        """Write what is queued, 128 entries a write, and the compiled loops' frames; an
        entry leaves the queue only once written, so what a lost reader missed goes to the
        next one."""
        taken = self._taken
        for source in self._sources:
            data, count = source.take_taps()
            if data:
                taken.append((data, count))
        while taken:
            data, count = taken[0]
            if data:
                self._write(data)
            taken.popleft()
            self.written += count
        queue = self._queue
        while queue:
            n = min(len(queue), 128)
            self._write(b"".join(self._encoded(queue[k]) for k in range(n)))
            size = 0
            for _ in range(n):
                query, reply = queue.popleft()[:2]
                size += len(query) + len(reply or b"")
            with self._lock:
                self._bytes -= size

    def _encoded(self, entry: Entry) -> bytes:
        """The entry's frames; a bug costs this entry (logged at a bounded rate), never the
        writer or the entries behind it."""
        try:
            return b"".join(self._frames(entry))
        except Exception:
            FAILURE_LOG.log(
                time.monotonic(), logging.ERROR, "dnstap: cannot encode a message", exc_info=True
            )
            return b""

    def _write(self, data: bytes) -> None:
        out = self._out
        if out is None:
            raise OSError("no reader")
        if isinstance(out, socket.socket):
            out.sendall(data)
        else:
            out.write(data)
            out.flush()

    def _frames(self, entry: Entry) -> Iterator[bytes]:
        query, reply, client, client_port, server, server_port, transport, qtime, rtime, lb = entry
        pb, wanted = self._pb, self.settings.messages
        update = len(query) > 2 and (query[2] >> 3) & 0x0F == 5  # opcode UPDATE
        kinds = ("update_query", "update_response") if update else ("auth_query", "auth_response")
        for kind in kinds:
            if kind not in wanted or (kind.endswith("response") and reply is None):
                continue
            tap = pb.Dnstap(
                identity=self.settings.identity.encode(), version=VERSION, type=pb.Dnstap.MESSAGE
            )
            m = tap.message
            m.type = getattr(pb.Message, kind.upper())
            m.socket_family = pb.INET if client.version == 4 else pb.INET6
            m.socket_protocol = pb.UDP if transport == "udp" else pb.TCP
            m.query_address = client.packed
            m.query_port = client_port
            with contextlib.suppress(ValueError):
                m.response_address = _packed(server, client.version)
            m.response_port = server_port
            m.query_time_sec, m.query_time_nsec = _split(qtime)
            if kind.endswith("query"):
                m.query_message = query
            else:
                m.response_message = reply or b""
                m.response_time_sec, m.response_time_nsec = _split(rtime)
                if lb is not None:
                    _set_policy(m, lb)
            payload = tap.SerializeToString()
            self.written += 1
            yield struct.pack("!I", len(payload)) + payload


def _dnstap_pb() -> Any:
    import dnstap_pb

    return dnstap_pb


def _set_policy(message: Any, decision: tuple[str, str, str]) -> None:
    """A load-balanced answer's decision in `message.policy`: (lb, pool, client region)."""
    name, pool, region = decision
    pb = _dnstap_pb()
    message.policy.type = "dnsd"
    message.policy.rule = f"{name} -> {pool}".encode()
    message.policy.match = pb.Policy.CLIENT_IP
    message.policy.value = (region or "").encode()
    message.policy.action = pb.Policy.LOCAL_DATA


def server_address(host: str) -> bytes:
    """The serving socket's address as dnstap's response_address (IPv4 when mapped)."""
    return _packed(host, 4)


def _packed(host: str, version: int) -> bytes:
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if version == 4 and isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.packed


def _split(t: float) -> tuple[int, int]:
    sec = int(t)
    return sec, int((t - sec) * 1e9)
