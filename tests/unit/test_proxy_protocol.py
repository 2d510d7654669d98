"""PROXY protocol v2 headers (haproxy's doc/proxy-protocol.txt): parse, bounds, the gate."""

from __future__ import annotations

import ipaddress
import socket
import struct

import pytest

from dnsd.net import proxy_protocol as pp
from dnsd.net.proxy_protocol import Header, ProxyGate, parse, parse_networks

QUERY = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x04test\x00\x00\x01\x00\x01"


def header(
    src: str = "81.2.69.142",
    sport: int = 40000,
    dst: str = "127.0.0.1",
    dport: int = 53,
    *,
    version: int = 2,
    command: int = 1,
    family: int | None = None,
    proto: int = 2,
    tlvs: bytes = b"",
    length: int | None = None,
) -> bytes:
    """A header as dnsdist/haproxy build one (TLVs after the addresses)."""
    six = ":" in src
    af = socket.AF_INET6 if six else socket.AF_INET
    addresses = socket.inet_pton(af, src) + socket.inet_pton(af, dst)
    body = addresses + struct.pack("!HH", sport, dport) + tlvs
    fam = family if family is not None else (2 if six else 1)
    size = len(body) if length is None else length
    return (
        pp.SIGNATURE
        + bytes([version << 4 | command, fam << 4 | proto])
        + struct.pack("!H", size)
        + body
    )


TLV = bytes([0x04]) + struct.pack("!H", 3) + b"abc"  # PP2_TYPE_NOOP, skipped
GOOD = [
    ("v4 udp", header(), Header("81.2.69.142", 40000, 28)),
    ("v4 tcp", header(proto=1), Header("81.2.69.142", 40000, 28)),
    ("v6 udp", header("2a00:1450:4000::1", 5300, "::1"), Header("2a00:1450:4000::1", 5300, 52)),
    ("v6 tcp", header("2a00:1450:4000::1", 5300, "::1", proto=1),
     Header("2a00:1450:4000::1", 5300, 52)),
    ("tlvs skipped", header(tlvs=TLV), Header("81.2.69.142", 40000, 34)),
    ("local", header(command=0), Header(None, None, 28)),
    ("local, no addresses", pp.SIGNATURE + b"\x20\x00\x00\x00", Header(None, None, 16)),
]  # fmt: skip
BAD = [
    ("no header", QUERY, pp.MISSING),
    ("bad signature", b"\r\n\r\n\x00\r\nQUIT!" + header()[12:], pp.MISSING),
    ("empty", b"", pp.TRUNCATED),
    ("cut in the signature", pp.SIGNATURE[:7], pp.TRUNCATED),
    ("cut in the fixed part", header()[:14], pp.TRUNCATED),
    ("cut in the addresses", header()[:20], pp.TRUNCATED),
    ("length past the data", header(length=40), pp.TRUNCATED),
    ("over-long", header(length=pp.MAX_BODY + 1) + bytes(pp.MAX_BODY + 1), pp.TOO_LONG),
    ("over-long, the maximum", header(length=0xFFFF), pp.TOO_LONG),
    ("version 1", header(version=1), pp.BAD_VERSION),
    ("the text v1 form", b"PROXY TCP4 81.2.69.142 127.0.0.1 40000 53\r\n", pp.MISSING),
    ("command 2", header(command=2), pp.BAD_COMMAND),
    ("unknown family", header(family=5), pp.BAD_FAMILY),
    ("unix family", header(family=3), pp.BAD_FAMILY),
    ("unspecified family", header(family=0), pp.BAD_FAMILY),
    ("unknown protocol", header(proto=3), pp.BAD_FAMILY),
    ("v6 family, v4 block", header(family=2), pp.BAD_ADDRESS),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_good_headers(data: bytes, expected: Header) -> None:
    assert parse(data + QUERY) == expected
    assert (data + QUERY)[expected.length :] == QUERY


@pytest.mark.parametrize(("data", "reason"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_headers(data: bytes, reason: str) -> None:
    assert parse(data) == reason
    assert reason in pp.REASONS


def test_header_length_bounds_before_reading() -> None:
    assert pp.header_length(header(tlvs=TLV)[:16]) == 34
    assert pp.header_length(header(length=pp.MAX_BODY)[:16]) == 16 + pp.MAX_BODY
    assert pp.header_length(header(length=pp.MAX_BODY + 1)[:16]) == pp.TOO_LONG


def test_gate_listed_unlisted_and_counts() -> None:
    gate = ProxyGate(parse_networks("127.0.0.1/32, 10.0.0.0/8"))
    assert gate.unwrap(header() + QUERY, "127.0.0.1", 9999) == (QUERY, "81.2.69.142", 40000)
    assert gate.unwrap(header() + QUERY, "::ffff:10.1.2.3", 9999) == (
        QUERY, "81.2.69.142", 40000,
    )  # fmt: skip
    assert gate.unwrap(header(command=0) + QUERY, "127.0.0.1", 9999) == (QUERY, "127.0.0.1", 9999)
    assert gate.unwrap(QUERY, "127.0.0.1", 9999) is None  # a listed peer without a header
    assert gate.unwrap(header() + QUERY, "192.0.2.1", 9999) is None  # unlisted with one
    assert gate.unwrap(QUERY, "192.0.2.1", 9999) == (QUERY, "192.0.2.1", 9999)
    assert gate.unwrap(header(family=5) + QUERY, "127.0.0.1", 1) is None
    assert {k: v for k, v in gate.dropped.items() if v} == {
        pp.MISSING: 1, pp.UNLISTED: 1, pp.BAD_FAMILY: 1,
    }  # fmt: skip
    [family] = list(gate.collect())
    assert family.name == "dnsd_proxy_protocol_dropped"
    assert {s.labels["reason"]: s.value for s in family.samples}[pp.UNLISTED] == 1


@pytest.mark.parametrize("text", ["", ",", "10.0.0.300/8", "example.com", "127.0.0.1/33"])
def test_bad_networks_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_networks(text)


def test_networks() -> None:
    assert parse_networks("127.0.0.1,::1/128,10.1.2.3/8") == [
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("::1/128"),
        ipaddress.ip_network("10.0.0.0/8"),
    ]


def test_server_file_and_flag(tmp_path) -> None:
    from dnsd.cli import build_parser
    from dnsd.cli.flags import subparser
    from dnsd.cli.worker_argv import worker_arguments
    from dnsd.serverfile import read

    parser = subparser(build_parser(), "serve")
    good = tmp_path / "dnsd.yaml"
    good.write_text("proxy_protocol_from: [127.0.0.1/32, '10.0.0.0/8,::1']\n")
    values, problems = read(good, parser)
    assert problems == []
    assert [str(n) for ns in values["proxy_protocol_from"] for n in ns] == [
        "127.0.0.1/32", "10.0.0.0/8", "::1/128",
    ]  # fmt: skip
    bad = tmp_path / "bad.yaml"
    bad.write_text("workers: 2\nproxy_protocol_from: [10.0.0.300/8]\n")
    _, problems = read(bad, parser)
    assert [(p.line, p.message) for p in problems] == [
        (2, "'10.0.0.300/8' is not an address or network (CIDR)")
    ]
    args = parser.parse_args(["zones", "--proxy-protocol-from", "127.0.0.1/32,::1"])
    argv = worker_arguments(parser, args)  # a worker process reads the same headers
    assert argv[argv.index("--proxy-protocol-from") + 1] == "127.0.0.1/32,::1/128"


@pytest.mark.parametrize("data", [c[1] for c in GOOD + BAD], ids=[c[0] for c in GOOD + BAD])
def test_split_agrees_with_parse(data: bytes) -> None:
    """The compiled loop's fast read gives what parse gives, for every case."""
    gate = ProxyGate(parse_networks("127.0.0.1/32"))
    header = parse(data + QUERY)
    got = gate.split(data + QUERY, "127.0.0.1")
    if isinstance(header, str):
        assert got is None and gate.dropped[header] == 1
    elif header.host is None:
        assert got == (header.length, b"")
    else:
        af = socket.AF_INET6 if ":" in header.host else socket.AF_INET
        assert got == (header.length, socket.inet_pton(af, header.host))
    assert gate.split(QUERY, "192.0.2.1") == (0, b"")  # not listed, no header: as it came
