"""`answer_pools` and `distinct` checked against the pools they read (docs/steering.md,
several pools per answer): a load balancer answering from several pools takes one address
from each, so every pool it names must be a pool (not `lb:NAME`), `max_answers` stays 1, and
the label `distinct` compares must be set on every pool (`region`, `domain`) or backend
(`zone`) — a pool without one could never be told apart, which is a mistake, not a rule.
"""

from __future__ import annotations

from dnsd.config.model import LB_PREFIX, Config, LoadBalancer, Pool
from dnsd.errors import Reason


def check_answer_pools(config: Config) -> list[Reason]:
    reasons: list[Reason] = []
    for lb in config.load_balancers.values():
        reasons.extend(_check(config, lb))
    return reasons


def _label_missing(pool: Pool, distinct: str) -> bool:
    if distinct == "zone":
        return any(b.zone is None for b in pool.backends)
    return (pool.region if distinct == "region" else pool.domain) is None


def _check(config: Config, lb: LoadBalancer) -> list[Reason]:
    line = lb.answer_pools_line
    path = f"load_balancers.{lb.name}"

    def error(key: str, message: str, warning: bool = False) -> Reason:
        return Reason(lb.file, line, f"{path}.{key}", message, warning=warning)

    if lb.answer_pools == 1:
        if lb.distinct is not None:
            return [error("distinct", "distinct needs answer_pools of 2 or more")]
        return []
    out = []
    if lb.max_answers > 1:
        out.append(
            error(
                "answer_pools",
                f"answer_pools {lb.answer_pools} takes one address from each pool: "
                f"max_answers {lb.max_answers} cannot apply too (remove one of them)",
            )
        )
    refs = lb.pool_refs()
    nested = [ref for ref in refs if ref.startswith(LB_PREFIX)]
    if nested:
        out.append(
            error(
                "answer_pools",
                f"answer_pools takes one address from each pool: {', '.join(nested)} "
                "is a load balancer, not a pool",
            )
        )
    pools = [config.pools[ref] for ref in refs if ref in config.pools]
    if lb.distinct is None:
        return out
    where = {"region": "pool has no region", "domain": "pool has no domain", "zone": ""}
    missing = [pool.name for pool in pools if _label_missing(pool, lb.distinct)]
    if missing:
        what = where[lb.distinct] or "pool has a backend without a zone"
        out.append(
            error(
                "distinct",
                f"distinct: {lb.distinct}: every pool needs one to be told apart; "
                f"this {what}: {', '.join(missing)}",
            )
        )
    elif lb.distinct != "zone":
        labels = {pool.region if lb.distinct == "region" else pool.domain for pool in pools}
        if len(labels) < lb.answer_pools:
            out.append(
                error(
                    "answer_pools",
                    f"answer_pools {lb.answer_pools} with distinct: {lb.distinct}: the pools "
                    f"span only {len(labels)} ({', '.join(sorted(str(x) for x in labels))}), "
                    "so answers hold at most that many addresses",
                    warning=True,
                )
            )
    return out
