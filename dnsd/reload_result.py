"""What a config reload answers: the server produces it, the admin API and the config
writer (dnsd.provision) report it. It lives below both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ReloadResult:
    ok: bool
    generation: int
    errors: list[str]  # the reasons it failed, or the new config's warnings
    # Server file settings that changed but keep their old value until a restart.
    restart_needed: list[str] = field(default_factory=list)
