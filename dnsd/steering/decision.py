"""Why steering decided what it did: one explanation per load balancer, nested for `lb:`
entries, built from the walk that made the decision (`records.LbAnswer`, which the
outermost carries as `answer`).

`dnsd explain` and the admin explain endpoint print these; the answer is the decision
they carry, so an explanation cannot disagree with the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dnsd.affinity import AffinityDecision
from dnsd.steering.records import A, LbAnswer, decision_records


@dataclass(frozen=True, slots=True)
class Candidate:
    pool: str  # pool name or lb:NAME
    healthy: bool  # healthy and able to answer this client
    rtt_ms: float | None  # from the client's region, when current
    why_not: str | None = None  # why it cannot answer this client (unhealthy, overridden …)


@dataclass(slots=True)
class LbDecision:
    lb: str
    policy: str
    ttl: int
    candidates: list[Candidate] = field(default_factory=list)  # every pool the LB names
    ordered: list[str] = field(default_factory=list)  # healthy candidates in policy order
    trickle_ratio: float = 0.0
    trickle_draw: float | None = None
    primary: str | None = None  # docs/steering.md, trickle: first listed entry for this client
    backup: str | None = None  # the trickle's target while the primary is healthy
    rtt_source: str | None = None  # dynamic: the vantage point whose RTTs decided
    client_region: str = "client"  # client | pop (docs/steering.md, locating the client)
    pool: str | None = None  # chosen entry (pool name or lb:NAME)
    fail_open: bool = False  # nothing healthy: the fallback answers regardless of health
    # docs/steering.md, when all pools are down: the rule that answered at this level, if any
    when_all_down: str | None = None
    # docs/steering.md, ramps: the move in force for this client region (from, to, step,
    # steps, share, draw), None when no ramp is in force at this level
    ramp: dict[str, Any] | None = None
    # docs/steering.md, several pools per answer: the pools the addresses came from
    answer_pools: tuple[str, ...] = ()
    nested: LbDecision | None = None
    affinity: AffinityDecision | None = None
    addresses: tuple[str, ...] = ()
    cname: str | None = None
    scope_prefixes: list[int] = field(default_factory=list)  # prefixes the answer depended on
    reasons: list[str] = field(default_factory=list)
    answer: LbAnswer | None = None  # the decision explained (set on the outermost level)
    not_chosen: dict[str, str] = field(default_factory=dict)  # pool → why it did not answer

    def innermost(self) -> LbDecision:
        return self.nested.innermost() if self.nested else self

    def any_fail_open(self) -> bool:
        """Nothing was healthy at some level of the path: a fallback answered."""
        return self.fail_open or (self.nested is not None and self.nested.any_fail_open())

    def all_down_rule(self) -> str | None:
        """The `when_all_down` rule that answered on this path (the deepest one), if any."""
        inner = self.nested.all_down_rule() if self.nested else None
        return inner or self.when_all_down

    def any_ramp(self) -> dict[str, Any] | None:
        """The ramp in force on this path (the outermost one), if any."""
        return self.ramp or (self.nested.any_ramp() if self.nested else None)

    def all_scope_prefixes(self) -> list[int]:
        inner = self.nested.all_scope_prefixes() if self.nested else []
        return self.scope_prefixes + inner

    def trail(self) -> list[str]:
        lines = [f"{self.lb}: {r}" for r in self.reasons]
        if self.nested:
            lines += self.nested.trail()
        if self.affinity:
            lines += [f"{self.lb}/{self.pool}: {r}" for r in self.affinity.reasons]
        return lines

    def pools_used(self) -> list[dict[str, Any]]:
        """Every pool the LB names in the order this query used them: the one that answered,
        the others able to answer in policy order, then the skipped ones; each with why it
        did not answer."""
        by_name = {c.pool: c for c in self.candidates}
        ordered = [p for p in ([self.pool] if self.pool else []) + self.ordered if p in by_name]
        ordered = list(dict.fromkeys(ordered))
        rest = [c.pool for c in self.candidates if c.pool not in ordered]
        rest.sort(key=lambda name: not by_name[name].healthy)  # able ones first
        return [
            {
                "pool": name,
                "rank": ordered.index(name) + 1 if name in ordered else None,
                "answered": name == self.pool or name in self.answer_pools,
                "healthy": by_name[name].healthy,
                "rtt_ms": by_name[name].rtt_ms,
                "why_not": None if name == self.pool else self.not_chosen.get(name),
            }
            for name in [*ordered, *rest]
        ]

    def to_json(self) -> dict[str, Any]:
        inner = self.innermost()
        aff = inner.affinity
        return {
            "lb": self.lb,
            "policy": self.policy,
            "candidates": [
                {"pool": c.pool, "healthy": c.healthy, "rtt_ms": c.rtt_ms} for c in self.candidates
            ],
            "pools": self.pools_used(),
            "ordered": self.ordered,
            "trickle_ratio": self.trickle_ratio,
            "trickle_draw": self.trickle_draw,
            "primary": self.primary,
            "backup": self.backup,
            "rtt_source": self.rtt_source,
            "client_region": self.client_region,
            "fail_open": self.any_fail_open(),
            "when_all_down": self.all_down_rule(),
            "ramp": self.any_ramp(),
            "pool": inner.pool,
            "answer_pools": list(inner.answer_pools),
            "path": self.path(),
            "original_kind": aff.original_kind if aff else None,
            "eligible": [b.name for b in aff.original] if aff else [],
            "zonal_match": aff.zonal_match if aff else False,
            "modified_eligible": [b.name for b in aff.modified] if aff else [],
            # the same for AAAA
            "answer": [r.value for r in decision_records(self.answer, A)] if self.answer else [],
            "ttl": self.ttl,
            "trail": self.trail(),
        }

    def path(self) -> list[str]:
        """The chain of entries chosen: ["lb:api-regional", "eu-west"]."""
        head = [self.pool] if self.pool else []
        return head + (self.nested.path() if self.nested else [])
