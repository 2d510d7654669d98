"""Where the cluster's Redis is and how to reach it: one plain server, TLS, an ACL user, or
a Sentinel-managed primary (docs/operations.md "Production Redis").

`--redis` takes
* `redis://[USER:PASS@]HOST:PORT[/DB]` — one server (USER/PASS: a Redis ACL user);
* `rediss://…` — the same over TLS: the server's certificate must chain to `--redis-ca-file`
  (or the system's CA store) and name HOST;
* `redis+sentinel://[USER:PASS@]H1:P1,H2:P2/SERVICE[/DB]` (`rediss+sentinel://` with TLS) —
  ask the sentinels for SERVICE's primary, and again after every lost connection, so a
  node follows a failover.

The password never leaves this module but inside the client: `redacted()` is what logs,
status and `config show` print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel

TIMEOUTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
SCHEMES = ("redis", "rediss", "redis+sentinel", "rediss+sentinel")


def redacted(url: str) -> str:
    """The URL without its password (redis://user:PASSWORD@host → redis://user:***@host)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"


@dataclass(frozen=True, slots=True)
class RedisTarget:
    url: str
    ca_file: str | None = None

    def __post_init__(self) -> None:
        scheme = self.url.partition("://")[0]
        if scheme not in SCHEMES or "://" not in self.url:
            raise ValueError(
                f"--redis: {redacted(self.url)}: the scheme is one of {', '.join(SCHEMES)}"
            )
        if self.sentinel:
            self.sentinel_parts()  # a malformed list of sentinels fails at start, not later

    @property
    def tls(self) -> bool:
        return self.url.startswith("rediss")

    @property
    def sentinel(self) -> bool:
        return "+sentinel://" in self.url

    def __str__(self) -> str:
        return redacted(self.url)

    def _tls_options(self) -> dict[str, Any]:
        if not self.tls:
            return {}
        # The server's name is checked against its certificate (ssl_check_hostname).
        return {
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
            "ssl_ca_certs": self.ca_file,
        }

    def sentinel_parts(self) -> tuple[list[tuple[str, int]], str, int, str | None, str | None]:
        """(sentinels, service, db, user, password) of a redis+sentinel:// URL."""
        rest = self.url.partition("://")[2]
        credentials, at, location = rest.rpartition("@")
        user = password = None
        if at:
            user_part, _, pass_part = credentials.partition(":")
            user, password = unquote(user_part) or None, unquote(pass_part) or None
        hosts, _, path = location.partition("/")
        service, _, db = path.partition("/")
        if not hosts or not service:
            raise ValueError(
                f"--redis: {redacted(self.url)}: redis+sentinel://[USER:PASS@]H1:P1,H2:P2/SERVICE[/DB]"
            )
        sentinels = []
        for host_port in hosts.split(","):
            host, colon, port = host_port.rpartition(":")
            if not colon or not port.isdigit():
                raise ValueError(f"--redis: {host_port!r} is not HOST:PORT")
            sentinels.append((host.strip("[]"), int(port)))
        return sentinels, service, int(db or 0), user, password

    def connect(self) -> tuple[aioredis.Redis, Sentinel | None]:
        """A client (no connection made yet) and, with Sentinel, the sentinels to ask."""
        if not self.sentinel:
            return aioredis.from_url(self.url, **TIMEOUTS, **self._tls_options()), None
        sentinels, service, db, user, password = self.sentinel_parts()
        manager = Sentinel(
            sentinels,
            sentinel_kwargs=dict(TIMEOUTS),
            **TIMEOUTS,
            username=user,
            password=password,
            ssl=self.tls,
            **self._tls_options(),
        )
        return manager.master_for(service, db=db), manager

    async def primary(self, manager: Sentinel) -> tuple[str, int]:
        """Where the sentinels say the primary is now."""
        _, service, *_ = self.sentinel_parts()
        host, port = await manager.discover_master(service)
        return str(host), int(port)
