"""Run inside `unshare -n` (a network namespace with loopback only): serve a config with
`dnsd serve` on 127.0.0.1:53, let DNSViz probe the names given (authoritative analysis,
the delegation and DS given, so no query leaves the namespace) and grok the result with
the zone's KSK as trust anchor. Prints one JSON object: every error and warning DNSViz
reports, as [where, code, description].

    unshare -n python -m tests.e2e.dnsviz_offline CONFIG_DIR STATE_DIR ZONE NAME...
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rdatatype


def main(config: str, state: str, zone: str, names: list[str]) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = Path(state) / "dnsviz"
    work.mkdir(parents=True, exist_ok=True)
    log = open(work / "serve.log", "wb")  # noqa: SIM115  (open while dnsd runs)
    serve = subprocess.Popen(
        [sys.executable, "-m", "dnsd", "serve", config, "--listen", "127.0.0.1:53",
         "--admin", "off", "--state-dir", state, "--rrl-rate", "0"],
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        dnskey = _wait_for_dnskey(zone)
        listed = subprocess.run(
            [sys.executable, "-m", "dnsd", "keys", "list", zone, "--state-dir", state],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        ds = [line + "\n" for line in listed.splitlines() if " IN DS " in line]
        (work / "ds.txt").write_text("".join(ds))
        (work / "anchor.txt").write_text(dnskey)
        found: list[list[str]] = []
        for name in names:
            probe = subprocess.run(
                ["dnsviz", "probe", "-A", "-a", zone, "-N", f"{zone}:ns1.{zone}=127.0.0.1",
                 "-D", f"{zone}:{work / 'ds.txt'}", name],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if probe.returncode != 0:
                found.append([name, "PROBE_FAILED", probe.stderr[-500:]])
                continue
            grok = subprocess.run(
                ["dnsviz", "grok", "-l", "warning", "-t", str(work / "anchor.txt")],
                input=probe.stdout, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if grok.returncode not in (0, 1, 2) or not grok.stdout.strip():
                found.append([name, "GROK_FAILED", grok.stderr[-500:]])
                continue
            _collect(json.loads(grok.stdout), name, found)
        print(json.dumps(found))
    finally:
        serve.terminate()
        serve.wait(timeout=10)
        log.close()


def _wait_for_dnskey(zone: str) -> str:
    """The zone's KSK (flags 257) as DNSKEY text, once dnsd answers."""
    deadline = time.monotonic() + 30
    while True:
        try:
            reply = dns.query.udp(dns.message.make_query(zone, "DNSKEY"), "127.0.0.1", timeout=1)
            rrset = next(r for r in reply.answer if r.rdtype == dns.rdatatype.DNSKEY)
            return "".join(
                f"{rrset.name} {rrset.ttl} IN DNSKEY {rd}\n" for rd in rrset if rd.flags == 257
            )
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _collect(node: Any, path: str, found: list[list[str]]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("errors", "warnings") and isinstance(value, list):
                found.extend([path, item.get("code", ""), item.get("description", "")]
                             for item in value)  # fmt: skip
            else:
                _collect(value, f"{path}/{key}", found)
    elif isinstance(node, list):
        for item in node:
            _collect(item, path, found)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
