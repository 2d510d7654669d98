"""Where a client's HTTP request stream is, as the admin server's door (dnsd.admin.guard)
sees it: which request has begun and not yet arrived whole."""

from __future__ import annotations

HEADER_END = b"\r\n\r\n"
MAX_HEAD = 16 * 1024  # request headers a reserve connection may send before it is judged


class RequestFraming:
    """Where a client's request stream is: which request has begun and not yet arrived
    whole (its headers after the first request, or its body by `Content-Length` or
    chunks). It only watches what is passed on to aiohttp, which parses it again and
    refuses what is malformed: a misreading here can only time a connection out."""

    def __init__(self) -> None:
        self.pending_since: float | None = None  # when the unfinished request began
        self._line = b""  # a head, or a chunk-size or trailer line, not yet whole
        self._state = "head"  # head | body | size | data | trailer
        self._left = 0  # bytes of the body or chunk (with its CRLF) still to come

    @property
    def in_body(self) -> bool:
        """Between a request's headers and the end of its body."""
        return self._state != "head"

    def feed(self, data: bytes, now: float) -> None:
        at = 0
        while at < len(data):
            if self._state in ("body", "data"):
                take = min(self._left, len(data) - at)
                self._left -= take
                at += take
                if self._left == 0:
                    self._state = "head" if self._state == "body" else "size"
                    if self._state == "head":
                        self.pending_since = None
                continue
            if self._state == "head" and not self._line and data.startswith(b"\r\n", at):
                at += 2  # an empty line between requests (RFC 9112 §2.2)
                continue
            if self.pending_since is None:
                self.pending_since = now
            mark = HEADER_END if self._state == "head" else b"\r\n"
            past = self._past(data, at, mark)
            if past < 0:  # kept whole while it is short; aiohttp refuses a longer one
                self._line = (self._line + data[at:])[-MAX_HEAD:]
                break
            line, self._line = (self._line + data[at:past])[: -len(mark)], b""
            at = past
            self._ended(line)

    def _past(self, data: bytes, at: int, mark: bytes) -> int:
        """Where in `data` the first `mark` from `at` on ends (one may begin in the line
        kept from before), -1: none. Searched in place: a stream of pipelined requests
        costs its length, not its length for each request."""
        if self._line:
            tail = self._line[-(len(mark) - 1) :]
            found = (tail + data[at : at + len(mark) - 1]).find(mark)
            if found >= 0:
                return at + found + len(mark) - len(tail)
        end = data.find(mark, at)
        return -1 if end < 0 else end + len(mark)

    def _ended(self, line: bytes) -> None:
        if self._state == "head":
            chunked, length = _framing(line)
            if chunked:
                self._state = "size"
            elif length:
                self._state, self._left = "body", length
            else:
                self.pending_since = None
        elif self._state == "size":
            size = line.partition(b";")[0].strip()
            try:
                self._left = int(size, 16) + 2 if size else -1
            except ValueError:
                self._left = -1
            if self._left < 0:
                self._state, self._left = "trailer", 0  # aiohttp refuses it and closes
            elif self._left == 2:
                self._state = "trailer"  # the last chunk: trailer lines, an empty one
            else:
                self._state = "data"
        elif not line:  # the empty line after the trailer: the request is whole
            self._state = "head"
            self.pending_since = None


def _framing(head: bytes) -> tuple[bool, int]:
    """(chunked, Content-Length) of a request head."""
    chunked, length = False, 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    return chunked, length
