"""What the answer cache keeps per key and per client: a static reply, a load-balanced
entry, a steering plan while it holds, and the memo one exact query's answer table is built
from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dnsd.answer_table import NOT_CACHED, Finished
from dnsd.config.model import LoadBalancer
from dnsd.fastpath.query_key import Parsed
from dnsd.reply import Client
from dnsd.steering import ClientInfo
from dnsd.steering.draws import Node, Outcome
from dnsd.steering.plan import LbPlan


@dataclass(frozen=True, slots=True)
class Static:
    wire: bytes  # ID 0, RD/CD clear, no ECS option (OPT RDLEN 0 when there is an OPT)


@dataclass(frozen=True, slots=True)
class Balanced:
    lb: LoadBalancer
    qtype: int  # the steered type (A for ANY)


class PlanEntry:
    """A plan and whether it still holds; memos compiled from it check `valid`, and the
    answer tables built from it (`users`: their table and key) go when it expires."""

    __slots__ = ("plan", "users", "valid")

    def __init__(self, plan: LbPlan) -> None:
        self.plan = plan
        self.valid = True
        self.users: list[tuple[dict[bytes, bytes], bytes]] = []

    def expire(self) -> None:
        self.valid = False
        for tables, key in self.users:
            tables.pop(key, None)
        self.users.clear()


STALE = PlanEntry.__new__(PlanEntry)
STALE.valid = False
STALE.users = []


class LbMemo:
    """What one exact query from one client needs for a load-balanced answer: the entry,
    the parsed query, the client's location, and — while its plan holds —
    the plan compiled into draws and, per outcome reached so far, the finished reply
    (after the ID) with the counters it bumps. `outcomes` and `samples`: what the leaf and
    sample ids of its current answer table stand for."""

    __slots__ = ("client", "entry", "info", "key", "outcomes", "parsed", "plan",
                 "samples", "serial", "tables", "tails", "tree")  # fmt: skip

    def __init__(
        self, entry: Balanced, parsed: Parsed, info: ClientInfo, client: Client,
        key: bytes, tables: dict[bytes, bytes],
    ) -> None:  # fmt: skip
        self.entry, self.parsed, self.info = entry, parsed, info
        self.client = client
        self.key, self.tables = key, tables  # its answer table: tables[key]
        self.plan = STALE  # the plan entry the draws were compiled from
        self.tree: Node | None = None
        self.tails: dict[Outcome, Finished] = {}
        self.outcomes: list[Outcome] = []
        self.samples: list[Any] = []
        self.serial = 0


def drawn_outcome(memo: LbMemo, code: int, value: int, order: Any) -> Node:
    """The outcome a walk of the memo's table reached without a finished reply."""
    if code == NOT_CACHED:
        return memo.outcomes[value]
    return memo.samples[value].outcome(order)
