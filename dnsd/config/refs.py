"""A name one entry of the global sections uses from another, with where it was written:
the section parsers collect them, `loader.py` checks them across files."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ref:
    """A name one entry uses from another section, with where it was written."""

    kind: str  # "monitor" | "pool" | "lb"
    name: str
    file: str
    line: int
    where: str  # the path of the key, shared by the items of one list
    index: int | None = None  # the item's place in that list

    @property
    def path(self) -> str:
        """Made when an error is reported: stored, a path per reference would cost more
        than the reference itself in a big configuration."""
        return self.where if self.index is None else f"{self.where}[{self.index}]"
