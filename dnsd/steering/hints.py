"""HTTPS and SVCB at a load-balanced name (docs/steering.md): the records' `ipv4hint` and
`ipv6hint` are the addresses this client's A and AAAA answers hold, so a client that
trusts the hints goes where steering sends it.

Both families are steered from the same random numbers (the AAAA walk replays the A
walk's draws from a copy of the random source), so the pool draws — the `random` policy's
pool, the trickle — come out the same and both hints name the same pools.
"""

from __future__ import annotations

import random
from dataclasses import replace

from dnsd.config.model import LoadBalancer
from dnsd.steering.decision import LbDecision
from dnsd.steering.inputs import SteeringInputs
from dnsd.steering.records import AAAA, A, decision_records
from dnsd.steering.select import steer


def steer_hints(inp: SteeringInputs, lb: LoadBalancer) -> LbDecision:
    """The A decision, carrying both families' addresses as `svc_hints`."""
    twin = random.Random()
    twin.setstate(inp.rng.getstate())
    decision = steer(inp, lb, A)
    both = steer(replace(inp, rng=twin), lb, AAAA)
    v4 = tuple(r.value for r in decision_records(decision, A) if r.rtype == A)
    v6 = tuple(r.value for r in decision_records(both, AAAA) if r.rtype == AAAA)
    decision.svc_hints = (v4, v6)
    decision.scope_prefixes.extend(both.all_scope_prefixes())  # the hints depend on both
    decision.reasons.append(
        f"HTTPS/SVCB hints: ipv4hint {','.join(v4) or '-'} ipv6hint {','.join(v6) or '-'} "
        "(this client's A and AAAA answers, drawn from the same random numbers)"
    )
    return decision
