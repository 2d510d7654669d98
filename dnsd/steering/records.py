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
from typing import TYPE_CHECKING, Final

from dnsd.steering.client import steered_type

if TYPE_CHECKING:  # the decision's explanation lists these records' values
    from dnsd.steering.decision import LbDecision

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


def decision_records(decision: LbDecision, qtype: int) -> tuple[LbRecord, ...]:
    """The records answering `qtype` with `decision` (empty: a negative answer)."""
    final = decision.innermost()
    if final.cname:
        return (LbRecord(CNAME, decision.ttl, str(final.cname)),)
    rtype = AAAA if steered_type(qtype) == AAAA else A
    return tuple(LbRecord(rtype, decision.ttl, str(address)) for address in final.addresses)
