"""File descriptors: take what the system allows, and share them out with a reserve.

At start the soft RLIMIT_NOFILE is raised to the hard limit. The TCP DNS listener and the
admin server then get caps that leave a reserve for what must never starve: health probes
(a failed probe would move answers), the UDP sockets, state and config files, pipes to
worker processes.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

log = logging.getLogger("dnsd.net")

RESERVE = 128  # probes, UDP sockets, files, pipes, Redis: never handed to clients
ADMIN_MAX = 128  # admin connections (a browser opens a few; scripts one)


@dataclass(frozen=True, slots=True)
class Descriptors:
    limit: int  # the soft limit now in force
    tcp_dns: int  # at most this many DNS-over-TCP connections
    admin: int  # at most this many admin connections


def share_descriptors(tcp_dns_wanted: int) -> Descriptors:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the soft limit: the shares below follow it
    budget = max(soft - RESERVE, 16)
    shares = Descriptors(
        limit=soft,
        tcp_dns=min(tcp_dns_wanted, max(budget * 2 // 3, 8)),
        admin=min(ADMIN_MAX, max(budget // 6, 4)),
    )
    if shares.tcp_dns < tcp_dns_wanted:
        log.warning(
            "descriptor limit %d: DNS over TCP capped at %d connections (of %d wanted), "
            "admin at %d, %d kept for probes and files",
            soft,
            shares.tcp_dns,
            tcp_dns_wanted,
            shares.admin,
            RESERVE,
        )
    return shares
