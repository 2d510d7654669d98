"""A real caching resolver for drills: unbound (Debian package) on a loopback port, with a
stub zone pointing at dnsd, so a drill sees what a real client sees, TTL caching included."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

from dnsd.drill.ports import free_port_pair

START_TRIES = 5  # a free port can be taken between the check and unbound's bind

CONFIG = """\
server:
    interface: 127.0.0.1
    port: {port}
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "{dir}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 0
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    module-config: "{modules}"
    cache-min-ttl: 0
    prefetch: no
    serve-expired: no
    qname-minimisation: no
    num-threads: 1
    outgoing-range: 64
    # .test (RFC 6761) is a built-in NXDOMAIN local zone in unbound: let the stub answer it
    local-zone: "{tld}." nodefault
remote-control:
    control-enable: no
stub-zone:
    name: "{zone}"
    stub-addr: 127.0.0.1@{dnsd_port}
{validation}"""


class Unbound:
    def __init__(
        self,
        zone: str,
        dnsd_port: int,
        trust_anchor: str | list[str] | None = None,
        client_subnet: bool = False,
    ) -> None:
        """`trust_anchor`: DS or DNSKEY records of `zone`; unbound then validates.
        `client_subnet`: pass the client's ECS option on to dnsd (unbound's subnetcache)."""
        self.client_subnet = client_subnet
        binary = shutil.which("unbound") or "/usr/sbin/unbound"
        if not Path(binary).exists():
            raise RuntimeError("unbound is not installed (Debian package unbound)")
        self.binary = binary
        self.zone, self.dnsd_port = zone, dnsd_port
        self.trust_anchor = trust_anchor
        self.dir = tempfile.mkdtemp(prefix="dnsd-unbound-")
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> Unbound:
        """Start on a port free for UDP and TCP (unbound binds both); when unbound still
        fails to bind (another process took the port meanwhile), try another port."""
        for attempt in range(START_TRIES):
            try:
                return await self._start_once()
            except _BindFailed:
                if attempt == START_TRIES - 1:
                    raise RuntimeError(
                        f"unbound could not bind after {START_TRIES} ports"
                    ) from None
        raise AssertionError("unreachable")

    async def _start_once(self) -> Unbound:
        from dnsd.drill.dnsclient import DnsClient

        self.port = free_port_pair()
        conf = Path(self.dir) / "unbound.conf"
        tld = self.zone.rstrip(".").rsplit(".", 1)[-1]
        conf.write_text(
            CONFIG.format(
                port=self.port,
                dir=self.dir,
                zone=self.zone,
                dnsd_port=self.dnsd_port,
                tld=tld,
                modules=("subnetcache " if self.client_subnet else "")
                + ("validator iterator" if self.trust_anchor else "iterator"),
                validation=_validation(self.trust_anchor) + (SUBNET if self.client_subnet else ""),
            )
        )
        self.proc = subprocess.Popen(
            [self.binary, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        client = await DnsClient("127.0.0.1", self.port, timeout_s=0.3, tries=1).open()
        try:
            for _ in range(100):
                if self.proc.poll() is not None:
                    errors = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    if "bind" in errors.lower() or "address already in use" in errors.lower():
                        raise _BindFailed(errors)
                    raise RuntimeError(f"unbound exited: {errors}")
                if (await client.query(f"ns1.{self.zone}", 0.0)).rcode != "TIMEOUT":
                    return self
                await asyncio.sleep(0.05)
        finally:
            client.close()
        self.stop_process()
        raise RuntimeError("unbound did not answer")

    def stop_process(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def stop(self) -> None:
        self.stop_process()
        shutil.rmtree(self.dir, ignore_errors=True)


SUBNET = """server:
    send-client-subnet: 127.0.0.1
    client-subnet-always-forward: yes
    max-client-subnet-ipv4: 24
"""


def _validation(trust_anchor: str | list[str] | None) -> str:
    """unbound validates the zone from these DS (or DNSKEY) records when given."""
    if trust_anchor is None:
        return ""
    anchors = [trust_anchor] if isinstance(trust_anchor, str) else trust_anchor
    lines = "".join(f'    trust-anchor: "{anchor}"\n' for anchor in anchors)
    return f"server:\n{lines}    val-log-level: 2\n"


class _BindFailed(Exception):
    """unbound exited because its port was taken."""
