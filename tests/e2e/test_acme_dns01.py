"""A certificate for a geo-steered name by the ACME DNS-01 challenge, offline, with the real
programs: `lego --dns rfc2136` publishes the challenge TXT in a real `dnsd serve` by a
TSIG-signed UPDATE (its key granted `_acme-challenge` TXT and nothing else), Debian's
`pebble` (the ACME server, resolving through dnsd) validates it, lego gets the certificate
and deletes the TXT. Everything stays on loopback."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from dnsd.drill.ports import free_port_pair
from tests.admin_client import http
from tests.processes import DnsdProcess
from tests.tls_certs import make_ca, make_server_cert
from tests.waiting import until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parent.parent.parent
NAME = "www.example.test"  # load-balanced, `steering: geo` in zones/example.test.yaml
CHALLENGE = f"_acme-challenge.{NAME}."
GRANT = """
update:
  - key: acme
    names: ["_acme-challenge", "_acme-challenge.*"]
    types: [TXT]
"""


def program(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is installed by `make test` (Debian package {name})"
    return path


class Pebble:
    """Debian's pebble on loopback ports, asking `dns` for every name it validates. Its
    HTTPS certificate is made here; lego trusts the CA that signed it."""

    def __init__(self, directory: Path, dns_port: int) -> None:
        directory.mkdir()
        self.ca, ca_cert, ca_key = make_ca(directory, "pebble-test-ca")
        cert, key = make_server_cert(directory, ca_cert, ca_key)
        self.port = free_port_pair()
        ports = [free_port_pair() for _ in range(3)]  # management, http-01, tls-alpn-01
        config = {
            "pebble": {
                "listenAddress": f"127.0.0.1:{self.port}",
                "managementListenAddress": f"127.0.0.1:{ports[0]}",
                "certificate": str(cert),
                "privateKey": str(key),
                "httpPort": ports[1],
                "tlsPort": ports[2],
                "ocspResponderURL": "",
                "externalAccountBindingRequired": False,
            }
        }
        (directory / "pebble.json").write_text(json.dumps(config))
        self.log = directory / "pebble.log"
        self.argv = [
            program("pebble"),
            "-config",
            str(directory / "pebble.json"),
            "-dnsserver",
            f"127.0.0.1:{dns_port}",
        ]
        # no random sleep before a validation, no nonce rejected to test clients' retries
        self.env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def directory_url(self) -> str:
        return f"https://localhost:{self.port}/dir"  # the name in its certificate

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def __enter__(self) -> Pebble:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        until(lambda: "ACME directory available" in self.output(), 15, self.output)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def dnsd(tmp_path: Path) -> Iterator[tuple[DnsdProcess, Path, str]]:
    config = tmp_path / "zones"
    shutil.copytree(ROOT / "zones", config)
    secret = base64.b64encode(os.urandom(32)).decode()
    (config / "acme.b64").write_text(secret + "\n")
    (config / "keys.yaml").write_text(
        "tsig_keys:\n  acme: {algorithm: hmac-sha256, secret_file: acme.b64}\n"
    )
    with open(config / "example.test.yaml", "a") as handle:
        handle.write(GRANT)
    with DnsdProcess(config, "--state-dir", str(tmp_path / "state")) as served:
        yield served, config, secret


def dig(port: int, name: str, qtype: str) -> tuple[str, list[str]]:
    flags = ["+time=2", "+tries=1", "+noall", "+comments", "+answer"]
    argv = ["dig", "@127.0.0.1", "-p", str(port), *flags, name, qtype]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
    status = out.split("status: ", 1)[1].split(",", 1)[0]
    return status, [line for line in out.splitlines() if line and not line.startswith(";")]


def update_events(admin_port: int) -> list[dict[str, object]]:
    code, body = http(admin_port, "GET", "/api/v1/events?kind=config")
    assert code == 200, body
    return [e for e in body["events"] if e["cause"] == "update"]


def test_lego_gets_a_certificate_from_pebble_for_a_geo_steered_name(
    dnsd: tuple[DnsdProcess, Path, str], tmp_path: Path
) -> None:
    served, config, secret = dnsd
    assert dig(served.port, CHALLENGE, "TXT")[0] == "NXDOMAIN"
    with Pebble(tmp_path / "pebble", served.port) as pebble:
        env = dict(
            os.environ,
            LEGO_CA_CERTIFICATES=str(pebble.ca),
            RFC2136_NAMESERVER=f"127.0.0.1:{served.port}",
            RFC2136_TSIG_KEY="acme",
            RFC2136_TSIG_SECRET=secret,
            RFC2136_TSIG_ALGORITHM="hmac-sha256.",
            RFC2136_DNS_TIMEOUT="5",
            RFC2136_PROPAGATION_TIMEOUT="20",
            RFC2136_POLLING_INTERVAL="1",
            NO_PROXY="localhost,127.0.0.1",
        )
        argv = [
            program("lego"),
            *f"--server {pebble.directory_url} --accept-tos --email acme@example.test".split(),
            *["--path", str(tmp_path / "lego"), "--dns", "rfc2136"],
            *["--dns.resolvers", f"127.0.0.1:{served.port}"],  # finds the zone by asking dnsd
            "--dns.disable-cp",  # no asking the zone's NS names: they are not on this machine
            *["--http-timeout", "10", "--cert.timeout", "30", "--domains", NAME, "run"],
        ]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        said = f"lego rc={done.returncode}\n{done.stdout}{done.stderr}\npebble:\n{pebble.output()}"
        assert done.returncode == 0, said
        assert "set VALID by completed challenge" in pebble.output(), said

    # the certificate is for that name, issued by pebble's CA
    pem = (tmp_path / "lego" / "certificates" / f"{NAME}.crt").read_bytes()
    cert = x509.load_pem_x509_certificate(pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [NAME]
    issuer = cert.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert str(issuer).startswith("Pebble Intermediate CA"), issuer
    assert (tmp_path / "lego" / "certificates" / f"{NAME}.key").exists()

    # the challenge TXT was written by an UPDATE, and deleted afterwards by another
    made = update_events(served.admin_port)
    assert len(made) >= 2 and {e["actor"] for e in made} == {"acme"}, made
    assert dig(served.port, CHALLENGE, "TXT")[0] == "NXDOMAIN"
    assert (
        "_acme-challenge" not in (config / "example.test.yaml").read_text().split("\nupdate:\n")[0]
    )
    status, answer = dig(served.port, NAME, "A")  # the load-balanced name is untouched
    assert status == "NOERROR" and answer and answer[0].split()[3] == "A", answer
