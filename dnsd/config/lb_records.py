"""Records written next to `lb:` that steering rewrites (docs/steering.md, HTTPS and SVCB at
a load-balanced name): an HTTPS or SVCB record there whose target is the name itself gets
its `ipv4hint`/`ipv6hint` from steering, so hints written by hand are never served — a
warning says so, before someone trusts them."""

from __future__ import annotations

from dnsd.config.model import Config
from dnsd.errors import Reason
from dnsd.rdata import SVC_TYPES, to_dnspython, type_text

HINT_KEYS = (4, 6)  # ipv4hint, ipv6hint (RFC 9460 §14.3.2)


def check_lb_records(config: Config) -> list[Reason]:
    reasons = []
    for zone in config.zones:
        for rrset in zone.rrsets:
            if rrset.rtype not in SVC_TYPES or rrset.owner not in zone.lb_names:
                continue
            for rd in rrset.rdatas:
                record = to_dnspython(rrset.rtype, rd)
                params = getattr(record, "params", {})
                if str(getattr(record, "target", "")) == "." and any(
                    int(key) in HINT_KEYS for key in params
                ):
                    relative = rrset.owner[: -len(zone.name)].rstrip(".") or "@"
                    message = (
                        f"{type_text(rrset.rtype)} {record}: at a load-balanced name the "
                        "ipv4hint/ipv6hint written here are replaced by the addresses "
                        f"load balancer {zone.lb_names[rrset.owner]!r} answers with"
                    )
                    reasons.append(Reason(zone.file, 0, f"records.{relative}", message, True))
    return reasons
