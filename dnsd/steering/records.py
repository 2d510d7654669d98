"""What a steering decision answers, as records no DNS library owns (pure).

The one rule from a decision to records — the query path (`dnsd.reply.fill`, dnslib) and
the transferred and signed load-balanced names (`dnsd.xfr.lb_answers`, dnspython) only
turn these values into their library's records, and an explanation's `answer` lists
their values (`LbDecision.to_json`):

* the innermost decision has a CNAME target: one CNAME record (a name with a CNAME holds
  nothing else; steering never picks both, see `steering.pick.answer_node`);
* else one record per address, AAAA for an AAAA query, A otherwise (ANY is answered as A,
  `steered_type`);
* nothing: no record — the answer is negative (NODATA, with the zone's SOA).

Every record has the decision's TTL (the load balancer's, for a nested one the outer's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from dnsd.steering.client import steered_type

A: Final = 1
CNAME: Final = 5
AAAA: Final = 28


@dataclass(frozen=True, slots=True)
class LbRecord:
    """One record at the load-balanced owner: its type, TTL and value in text (the CNAME
    target, or the address)."""

    rtype: int  # A, AAAA or CNAME
    ttl: int
    value: str


class Decided(Protocol):
    """What the records are made of: the decision's TTL and its innermost level's CNAME
    target or addresses. `LbDecision` is one; this module does not import it, because the
    decision's explanation lists these records' values (`LbDecision.to_json`)."""

    @property
    def ttl(self) -> int: ...

    @property
    def cname(self) -> str | None: ...

    @property
    def addresses(self) -> tuple[str, ...]: ...

    def innermost(self) -> Decided: ...


def decision_records(decision: Decided, qtype: int) -> tuple[LbRecord, ...]:
    """The records answering `qtype` with `decision` (empty: a negative answer)."""
    final = decision.innermost()
    if final.cname:
        return (LbRecord(CNAME, decision.ttl, str(final.cname)),)
    rtype = AAAA if steered_type(qtype) == AAAA else A
    return tuple(LbRecord(rtype, decision.ttl, str(address)) for address in final.addresses)
