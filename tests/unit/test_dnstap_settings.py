"""dnstap settings: the server file's `dnstap:` block becomes the `--dnstap-*` settings,
bad values are refused with the key's name, and the serving loops' side of the writer
never waits: past its bound the queue drops and counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from dnsd import serverfile
from dnsd.cli import build_parser
from dnsd.cli.flags import subparser
from dnsd.net.dnstap import DnstapSettings, DnstapWriter, settings_from


def read(tmp_path: Path, text: str) -> tuple[dict[str, object], list[str]]:
    path = tmp_path / "dnsd.yaml"
    path.write_text(text)
    values, reasons = serverfile.read(path, subparser(build_parser(), "serve"))
    return values, [str(r) for r in reasons]


def test_the_dnstap_block_sets_the_flags_settings(tmp_path: Path) -> None:
    values, reasons = read(tmp_path, "dnstap:\n  file: /tmp/q.tap\n  identity: ns1\n"
                           "  messages: [auth_response]\n  sample: 10\n")  # fmt: skip
    assert reasons == []
    assert values["dnstap_file"] == "/tmp/q.tap" and values["dnstap_identity"] == "ns1"
    assert values["dnstap_sample"] == 10 and values["dnstap_messages"] == ["auth_response"]


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        ("  file: q.tap\n  messages: [auth_query, everything]\n",
         "dnstap.messages: 'everything' is not one of auth_query"),
        ("  file: q.tap\n  messages: []\n", "dnstap.messages: name at least one"),
        ("  file: q.tap\n  sample: often\n", "dnstap.sample: expected a whole number"),
        ("  file: q.tap\n  path: q.tap\n", "path"),
        ("  [q.tap]\n", "dnstap"),
    ],
)  # fmt: skip
def test_a_bad_dnstap_block_is_refused_naming_the_key(
    tmp_path: Path, block: str, reason: str
) -> None:
    _, reasons = read(tmp_path, "dnstap:\n" + block)
    assert any(reason in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("/run/s.sock", "/tmp/q.tap", None, 1), "give one of them"),
        ((None, "/tmp/q.tap", None, 0), "--dnstap-sample"),
        ((None, "/tmp/q.tap", "x" * 300, 1), "--dnstap-identity"),
    ],
)
def test_settings_that_cannot_work_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from(*args)


def test_settings_default_to_every_message_and_the_host_name() -> None:
    settings = settings_from(None, "/tmp/q.tap", None, 1)
    assert settings.enabled and settings.identity
    assert settings.messages == {"auth_query", "auth_response", "update_query", "update_response"}
    assert not settings_from(None, None, None, 1).enabled


def test_a_full_queue_drops_and_counts() -> None:
    """No writer thread runs here: a put that waited for room would never return."""
    writer = DnstapWriter(DnstapSettings(socket="/nonexistent/dnstap.sock", queue=100))
    entry = (b"\0" * 12, None, None, 0, "127.0.0.1", 53, "udp", 0.0, 0.0, None)
    for _ in range(10_100):
        writer.put(entry)  # type: ignore[arg-type]
    assert writer.dropped == 10_000
    metric = next(writer.collect())
    assert metric.samples[0].name == "dnsd_dnstap_dropped_total"
    assert metric.samples[0].value == 10_000


def test_sample_logs_one_query_in_n() -> None:
    writer = DnstapWriter(DnstapSettings(file="/dev/null", sample=3))
    assert [writer.sampled() for _ in range(6)] == [False, False, True, False, False, True]


def test_the_queue_is_bounded_in_bytes_too() -> None:
    """Large TCP messages: the byte bound drops them before 10,000 of them could pile up."""
    writer = DnstapWriter(DnstapSettings(socket="/nonexistent/dnstap.sock", queue_bytes=1 << 20))
    big = (b"\0" * 65_535, b"\0" * 65_535, None, 0, "127.0.0.1", 53, "tcp", 0.0, 0.0, None)
    for _ in range(100):
        writer.put(big)  # type: ignore[arg-type]
    assert writer.dropped == 92  # 8 x 128 KiB fit in 1 MiB
