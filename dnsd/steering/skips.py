"""Why a pool an LB names cannot answer this client (for `dnsd explain`): the same tests
`select.able_checker` makes, in words."""

from __future__ import annotations

from dnsd.affinity import original_eligible
from dnsd.config.pool_refs import names_lb
from dnsd.steering.inputs import SteeringInputs


def unable_reason(inp: SteeringInputs, ref: str) -> str:
    """The reason `ref` is not able (call only for a ref the able checker refused)."""
    config = inp.snap.config
    if names_lb(ref):
        return "no healthy pool inside (or nested too deep)"
    pool = config.pools.get(ref)
    if pool is None:
        return "no such pool"
    override = inp.health.pool_overrides.get(pool.name)
    if override == "down":
        return "overridden down"
    if override is None and not pool.enabled:
        return "disabled in the config"
    if not inp.health.pool_healthy(pool):
        usable = [b for b in pool.backends if inp.health.usable(pool, b)]
        healthy = sum(1 for b in usable if inp.health.is_healthy(pool, b))
        return (
            f"unhealthy: {healthy} of {len(pool.backends)} backends healthy, "
            f"minimum_origins {pool.minimum_origins}"
        )
    if not original_eligible(pool, inp.health)[1]:
        return "no eligible backend (every one drained, disabled or dropped while unhealthy)"
    return "cannot answer this client"
