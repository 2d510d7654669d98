"""`ServerOptions`: what a server is started with — the listeners, the admin API, the
cluster, the serving loop, the workers — as `dnsd serve` and the tests give it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from dnsd.admin.gate import Token
from dnsd.admin.webhooks import Webhook
from dnsd.net import SERVING_LOOPS, UDP_LOOPS
from dnsd.net.dnstap import DnstapSettings
from dnsd.net.rrl import RrlSettings
from dnsd.net.tcp import TcpLimits
from dnsd.serverfile_reload import ServerFile
from dnsd.snapshot import NodeSettings


@dataclass(frozen=True, slots=True)
class ServerOptions:
    config_dir: Path
    listen: tuple[tuple[str, int], ...] = (("127.0.0.1", 5353),)
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    geoip: Path | None = None  # None: the embedded database
    node: NodeSettings = field(default_factory=NodeSettings)
    state_dir: Path | None = None  # persisted overrides; None keeps them in memory only
    admin: tuple[str, int] | None = None  # the admin HTTP server; None: not started
    admin_token: str | None = None  # bearer token for admin writes; None: writes refused
    tokens: tuple[Token, ...] = ()  # the server file's scoped tokens (dnsd.admin.gate)
    webhooks: tuple[Webhook, ...] = ()  # alerts (dnsd.admin.webhooks)
    query_log_sample: float = 0.0  # share of queries logged (JSON logs make them parseable)
    reuse_port: bool = False  # SO_REUSEPORT: a new process can take over without a gap
    rrl: RrlSettings = field(default_factory=RrlSettings)  # on, as `dnsd serve` runs it
    redis_url: str | None = None  # share health with other nodes through Redis
    redis_max_age_s: float = 30.0  # another node's observation counts this long
    redis_key: bytes | None = None  # the cluster key; None shares unsealed (--redis-insecure)
    redis_ca_file: str | None = None  # rediss://: the CA the server's certificate must chain to
    cluster_nodes: frozenset[str] | None = None  # who may speak on the bus; None: anyone
    answer_cache: bool = True  # dnsd.fastpath: same bytes, much less work per query
    udp_loop: str = UDP_LOOPS[0]  # "thread": a blocking socket loop per listener
    serving_loop: str = SERVING_LOOPS[0]  # that loop: compiled when built ("auto"), or pure
    first_round_wait_s: float = 10.0  # wait this long at most for the first probes before binding
    workers: int = 1  # processes answering on the listen addresses (dnsd.workers)
    key_dir: Path | None = None  # DNSSEC keys (STATE_DIR/keys); None: zones are not signed
    create_keys: bool = True  # False in a worker: it reads the keys the main process made
    worker_argv: tuple[str, ...] = ()  # a worker's `dnsd` arguments, --listen added on start
    follow_fd: int | None = None  # this is a worker: views and reloads come on this pipe
    server_file: ServerFile | None = None  # `--config FILE`: reloads read it again
    # --proxy-protocol-from: peers (dnsdist, haproxy) that prefix a PROXY v2 header; none: off
    proxy_protocol_from: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    dnstap: DnstapSettings = field(default_factory=DnstapSettings)  # off unless socket/file
