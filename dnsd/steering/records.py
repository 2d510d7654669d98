"""What steering decided for one query (`LbAnswer`), and the records it answers, which no
DNS library owns (pure).

`LbAnswer` is the one decision value: the query path (`dnsd.reply.fill`, dnslib), the
metrics, the transferred and signed load-balanced names (`dnsd.xfr.lb_answers`,
dnspython) read it; the explanation (`LbDecision`) is built beside it from the same walk
and carries it, so an explanation's `answer` lists these records' values.

The one rule from a decision to records:

* the outcome has a CNAME target: one CNAME record (a name with a CNAME holds
  nothing else; steering never picks both, see `steering.pick.answer_node`);
* else one record per address, AAAA for an AAAA query, A otherwise (ANY is answered as A,
  `steered_type`);
* nothing: no record — the answer is negative (NODATA, with the zone's SOA).

Every record has the decision's TTL (the load balancer's, for a nested one the outer's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

from dnsd.steering.client import steered_type
from dnsd.steering.draws import Outcome

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


class LbAnswer(NamedTuple):
    """The decision for one query at a load-balanced name: the walk's outcome, with the
    load balancer it answers for and that one's TTL (a nested one answers with it too).
    A tuple: the answer cache makes one per query it answers in Python."""

    lb: str
    ttl: int
    outcome: Outcome
    hints: bool = False  # HTTPS/SVCB: the addresses become the record's ipv4hint/ipv6hint

    @property
    def by_fallback(self) -> bool:
        """The fallback answered because nothing was healthy (not another when_all_down
        rule): what the fallback metric counts."""
        return self.outcome.fail_open and self.outcome.all_down is None

    def svc_hints(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """(ipv4hint, ipv6hint) of an HTTPS/SVCB answer: its A records' addresses (none
        for a CNAME answer) and the IPv6 addresses drawn beside them; None otherwise."""
        if not self.hints:
            return None
        outcome = self.outcome
        return (() if outcome.cname else outcome.addresses), outcome.hints6 or ()


def decision_records(answer: LbAnswer, qtype: int) -> tuple[LbRecord, ...]:
    """The records answering `qtype` with `answer` (empty: a negative answer)."""
    outcome = answer.outcome
    if outcome.cname:
        return (LbRecord(CNAME, answer.ttl, str(outcome.cname)),)
    rtype = AAAA if steered_type(qtype) == AAAA else A
    return tuple(LbRecord(rtype, answer.ttl, str(address)) for address in outcome.addresses)
