"""What each source region (or another node) says about one probe target, and why a
backend's verdict is what it is, in words for events and the status page."""

from __future__ import annotations

from dataclasses import dataclass

from dnsd.health.fsm import SourceState, State
from dnsd.health.view import RttSample


@dataclass(slots=True)
class SourceHealth:
    state: SourceState
    rtt: RttSample | None = None
    node: str | None = None  # another node's observation (shared through Redis)
    # Another node's last observation, older than the bus's max age (its node died or was
    # cut off): shown with its last state and time, but it does not vote (docs/health.md).
    stale: bool = False

    @property
    def vote(self) -> State | None:
        """What this source says for the quorum: None when it is stale."""
        return None if self.stale else self.state.state


def probe_cause(sources: dict[str, SourceHealth], verdict: str) -> str:
    """Why a backend's verdict is what it is, from its sources: `HTTP 503 from WEU` (each
    failing source's last error), or `probe ok from WEU, NAM`."""
    if verdict == "unhealthy":
        failing: dict[str, list[str]] = {}
        for source, h in sources.items():
            if h.state.state != "unhealthy":
                continue
            last = h.state.last
            why = (last.error if last and not last.ok and last.error else None) or (
                "unhealthy (another node)" if h.node else "probe failed"
            )
            failing.setdefault(why, []).append(source)
        parts = [f"{why} from {', '.join(names)}" for why, names in failing.items()]
        return "; ".join(parts) or "unhealthy"
    ok = [source for source, h in sources.items() if h.state.state == "healthy"]
    return f"probe ok from {', '.join(ok)}" if ok else f"{verdict}"
