"""HTTPS and SVCB at a load-balanced name (docs/steering.md): the records' `ipv4hint` and
`ipv6hint` are the addresses steering gives this client, so a client that trusts the hints
goes where steering sends it.

An HTTPS/SVCB question is steered like an A question by a plan that also holds each pool's
IPv6 addresses (`select.build_plan` with the HTTPS or SVCB type): the same pool draws (the
`random` policy's pool, the trickle) and the same IPv4 answer draw as the A question —
from the same random numbers, the same IPv4 addresses — then the IPv6 addresses' draw from
the same pools. So both hints name the same pools, and the answer cache and both serving
loops answer these questions like any other (one tree of draws per plan).
"""

from __future__ import annotations

from dnsd.config.model import LoadBalancer
from dnsd.steering.decision import LbDecision
from dnsd.steering.inputs import SteeringInputs
from dnsd.steering.select import build_plan, walked


def steer_hints(inp: SteeringInputs, lb: LoadBalancer, qtype: int) -> LbDecision:
    """The decision for an HTTPS or SVCB question (`qtype`), its hints explained."""
    decision = walked(inp, build_plan(inp, lb, qtype))
    hints = decision.answer.svc_hints() if decision.answer is not None else None
    v4, v6 = hints or ((), ())
    decision.reasons.append(
        f"HTTPS/SVCB hints: ipv4hint {','.join(v4) or '-'} ipv6hint {','.join(v6) or '-'} "
        "(the addresses an A and an AAAA question get from the same pool draws)"
    )
    return decision
