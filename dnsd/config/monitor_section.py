"""The `monitors` section: one monitor entry checked and built (the probe's type, cadence,
expected answers and where it probes from)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dnslib import QTYPE, RCODE

from dnsd.config import fields
from dnsd.config.checker import Checker, join, parse_duration
from dnsd.config.model import Monitor
from dnsd.config.names import absolute, name_problem
from dnsd.config.refs import Ref
from dnsd.config.region_hint import regions_hint
from dnsd.config.yamlio import LineDict
from dnsd.geo.regions import REGIONS

MONITOR_TYPES = ("http", "https", "tcp", "dns")
_CODES_ITEM = re.compile(r"^([1-5])xx$|^(\d{3})(?:-(\d{3}))?$")
_MONITOR_KEYS = (fields.names(fields.MONITOR), fields.required(fields.MONITOR))


def parse_expected_codes(value: Any) -> tuple[tuple[int, int], ...] | None:
    """`"2xx"`, `"200,301"`, `"200-299"` or 200 → inclusive ranges; None if malformed."""
    ranges = []
    for item in str(value).replace(" ", "").split(","):
        match = _CODES_ITEM.match(item)
        if not match:
            return None
        if match.group(1):
            base = int(match.group(1)) * 100
            ranges.append((base, base + 99))
        else:
            lo = int(match.group(2))
            hi = int(match.group(3) or lo)
            if not 100 <= lo <= hi <= 599:
                return None
            ranges.append((lo, hi))
    return tuple(ranges)


def monitor_entry(ck: Checker, d: LineDict, path: str, name: str, refs: list[Ref]) -> Monitor:
    ck.keys(d, path, *_MONITOR_KEYS)
    mtype = ck.get_enum(d, "type", path, MONITOR_TYPES, default="tcp")
    interval = ck.get_duration(d, "interval", path, default=15.0, lo=0.05)
    timeout = ck.get_duration(d, "timeout", path, default=5.0, lo=0.01)
    if timeout >= interval:  # also with a default: `interval: 1s` alone keeps timeout 5 s
        where = "timeout" if "timeout" in d else "interval"
        ck.warn(
            d.line_of(where),
            join(path, where),
            f"timeout ({timeout:g}s) is not shorter than the interval ({interval:g}s): a hung "
            "backend's probe runs into the next one and the outage bound grows",
        )
    codes: tuple[tuple[int, int], ...] = ((200, 299),)
    if "expected_codes" in d:
        parsed = parse_expected_codes(d["expected_codes"])
        if parsed is None:
            ck.error(
                d.line_of("expected_codes"),
                join(path, "expected_codes"),
                f'expected codes such as "200", "2xx" or "200,301", got {d["expected_codes"]!r}',
            )
        else:
            codes = parsed
    sources = []
    for src, line in ck.get_str_list(d, "sources", path, default=[]):
        if src not in REGIONS:
            ck.error(line, join(path, "sources"), f"unknown region {src!r} ({regions_hint(src)})")
        else:
            sources.append(src)
    quorum = ck.get_int(d, "quorum", path, default=None, lo=1)
    if quorum is not None and sources and quorum > len(sources):
        ck.error(
            d.line_of("quorum"),
            join(path, "quorum"),
            f"quorum {quorum} is larger than the {len(sources)} sources",
        )
    headers: dict[str, str] = {}
    if "headers" in d:
        h = ck.mapping(d["headers"], d.line_of("headers"), join(path, "headers"))
        for k, v in (h or {}).items():
            headers[str(k)] = str(v)
    return Monitor(
        name=name,
        type=mtype,
        interval_s=interval,
        timeout_s=timeout,
        retries=ck.get_int(d, "retries", path, default=0, lo=0, hi=10),
        healthy_threshold=ck.get_int(d, "healthy_threshold", path, default=2, lo=1, hi=100),
        unhealthy_threshold=ck.get_int(d, "unhealthy_threshold", path, default=2, lo=1, hi=100),
        port=ck.get_int(d, "port", path, default=None, lo=1, hi=65535),
        method=str(ck.get_str(d, "method", path, default="GET")).upper(),
        path=ck.get_str(d, "path", path, default="/"),
        host=ck.get_str(d, "host", path, default=None),
        headers=MappingProxyType(headers),
        expected_codes=codes,
        expected_body=ck.get_str(d, "expected_body", path, default=None),
        follow_redirects=ck.get_bool(d, "follow_redirects", path, default=False),
        allow_insecure=ck.get_bool(d, "allow_insecure", path, default=False),
        sources=tuple(sources),
        quorum=quorum,
        initial=ck.get_enum(d, "initial", path, ("healthy", "unhealthy"), default="healthy"),
        rtt_ewma_alpha=ck.get_float(d, "rtt_ewma_alpha", path, default=0.3, lo=0.01, hi=1.0),
        ca_file=_ca_file(ck, d, path),
        expected_rcodes=_expected_rcodes(ck, d, path),
        query_name=_query_name(ck, d, path),
        query_type=_query_type(ck, d, path),
        quorum_hold_s=_quorum_hold(ck, d, path),
    )


def _quorum_hold(ck: Checker, d: LineDict, path: str) -> float | None:
    """`quorum_hold`: a duration (default 30 s) or `forever` (docs/health.md "Lost quorum")."""
    value = d.get("quorum_hold", 30.0)
    if value == "forever":
        return None
    hold = parse_duration(value)
    if hold is None:
        ck.error(
            d.line_of("quorum_hold"),
            join(path, "quorum_hold"),
            f"expected a duration such as 30s or 2m, or forever, got {value!r}",
        )
        return 30.0
    return hold


def _ca_file(ck: Checker, d: LineDict, path: str) -> str | None:
    """`ca_file`: PEM CA certificates for `https` probes, relative to the config file's
    directory. Loaded here once so a missing or broken file is a load error, not a probe
    that fails forever."""
    value = ck.get_str(d, "ca_file", path, default=None)
    if value is None:
        return None
    where = Path(ck.file).parent / value
    try:
        ssl.create_default_context(cafile=str(where))
    except (OSError, ssl.SSLError) as exc:
        ck.error(d.line_of("ca_file"), join(path, "ca_file"), f"cannot load CA file {where}: {exc}")
        return None
    return str(where.resolve())


def _expected_rcodes(ck: Checker, d: LineDict, path: str) -> tuple[int, ...]:
    """`expected_rcodes: [NOERROR, NXDOMAIN]` for `dns` probes; default NOERROR only."""
    out = []
    for name, line in ck.get_str_list(d, "expected_rcodes", path, default=[("NOERROR", 0)]):
        code = RCODE.reverse.get(name.upper())
        if code is None:
            ck.error(
                line,
                join(path, "expected_rcodes"),
                f"unknown rcode {name!r} (NOERROR, NXDOMAIN, …)",
            )
        else:
            out.append(code)
    return tuple(out) or (0,)


def _query_name(ck: Checker, d: LineDict, path: str) -> str:
    name = absolute(str(ck.get_str(d, "query_name", path, default=".")), ".")
    problem = name_problem(name)
    if problem:
        ck.error(d.line_of("query_name"), join(path, "query_name"), problem)
        return "."
    return name


def _query_type(ck: Checker, d: LineDict, path: str) -> int:
    text = str(ck.get_str(d, "query_type", path, default="SOA")).upper()
    code = QTYPE.reverse.get(text)
    if code is None:
        ck.error(d.line_of("query_type"), join(path, "query_type"), f"unknown record type {text!r}")
        return QTYPE.SOA
    return int(code)
