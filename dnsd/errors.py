"""Error types shared by the control plane (config loading, admin)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reason:
    """One problem found in a configuration: where it is and what is wrong."""

    file: str
    line: int
    path: str
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        kind = "warning: " if self.warning else ""
        return (
            f"{where}: {kind}{self.path}: {self.message}"
            if self.path
            else f"{where}: {kind}{self.message}"
        )


class ConfigError(Exception):
    """The configuration is invalid; `reasons` holds every problem found."""

    def __init__(self, reasons: list[Reason]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("\n".join(str(r) for r in reasons))
