"""The admin door's reading of a request stream: when a request has begun and when it is
whole, for bodies by Content-Length and in chunks, however the bytes are split."""

from __future__ import annotations

import pytest

from dnsd.admin.request_framing import RequestFraming

GET = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
PUT = b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
CHUNKED = (
    b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n3\r\n\r\n\r\r\n0\r\nTrailer: t\r\n\r\n"
)


@pytest.mark.parametrize("stream", [GET * 3, PUT + GET + PUT, CHUNKED + PUT + CHUNKED + GET])
@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_a_whole_stream_leaves_nothing_pending_however_it_is_split(stream, step) -> None:
    framing = RequestFraming()
    for at in range(0, len(stream), step):
        framing.feed(stream[at : at + step], float(at))
    assert framing.pending_since is None


@pytest.mark.parametrize("cut", [1, 20, len(PUT) - 5, len(PUT) - 1])
def test_a_request_is_pending_from_its_first_byte_until_its_body_ends(cut) -> None:
    framing = RequestFraming()
    framing.feed(GET, 1.0)
    assert framing.pending_since is None
    framing.feed(PUT[:cut], 2.0)
    assert framing.pending_since == 2.0
    framing.feed(PUT[cut:-1], 3.0)
    assert framing.pending_since == 2.0  # still the same request: its start counts
    framing.feed(PUT[-1:], 4.0)
    assert framing.pending_since is None


def test_a_chunked_body_is_pending_until_the_end_of_its_trailer() -> None:
    framing = RequestFraming()
    framing.feed(CHUNKED[:-2], 1.0)
    assert framing.pending_since == 1.0
    framing.feed(CHUNKED[-2:], 2.0)
    assert framing.pending_since is None


def test_a_long_pipelined_stream_is_read_in_one_pass() -> None:
    framing = RequestFraming()
    framing.feed(GET * 20_000 + PUT[:-1], 1.0)  # 700 kB: quadratic would take minutes
    assert framing.pending_since == 1.0
