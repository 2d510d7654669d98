"""The reaper frees what it is given, only once nobody else holds it, and all of it."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dnsd import reaper
from tests.waiting import real_time_passes, until


class Leaf:
    """A weak-referenceable stand-in for a zone node."""


@dataclass(frozen=True)
class Tree:
    nodes: Any
    records: tuple[Leaf, ...]


def big_tree() -> tuple[Tree, list[weakref.ref[Leaf]]]:
    leaves = [Leaf() for _ in range(20_000)]
    tree = Tree(MappingProxyType({f"n{i}": leaf for i, leaf in enumerate(leaves)}),
                tuple(Leaf() for _ in range(5_000)))  # fmt: skip
    refs = [weakref.ref(leaf) for leaf in leaves] + [weakref.ref(r) for r in tree.records]
    return tree, refs


def wait_until(condition: Any, seconds: float = 10.0) -> bool:
    until(condition, seconds, "everything freed")
    return True


def test_everything_given_is_freed() -> None:
    tree, refs = big_tree()
    reaper.release_later(tree)
    del tree
    assert wait_until(lambda: all(r() is None for r in refs))


def test_nothing_is_freed_while_another_holder_keeps_it() -> None:
    tree, refs = big_tree()
    kept = tree
    reaper.release_later(tree)
    del tree
    real_time_passes(0.5, "ten of the reaper thread's own polls")
    assert all(r() is not None for r in refs)
    assert len(kept.nodes) == 20_000  # untouched: nothing mutated
    del kept
    assert wait_until(lambda: all(r() is None for r in refs))


def test_shared_elements_survive() -> None:
    tree, refs = big_tree()
    shared = list(tree.nodes.values())[:10]
    reaper.release_later(tree)
    del tree
    assert wait_until(lambda: sum(r() is not None for r in refs) == 10)
    assert all(isinstance(leaf, Leaf) for leaf in shared)


def test_big_containers_are_taken_apart_through_small_objects() -> None:
    """The pieces freed a slice at a time: every element of the nodes dict behind its
    mapping proxy and of the records tuple, found through the frozen dataclass."""
    tree, _ = big_tree()
    parts = reaper._elements_of_big_containers(tree)
    leaves = [p for p in parts if isinstance(p, Leaf)]
    assert len(leaves) == 25_000


def test_free_in_steps_empties_every_kind_of_container() -> None:
    items = [object() for _ in range(2000)]
    as_list, as_dict, as_set = list(items), {i: o for i, o in enumerate(items)}, set(items)
    reaper.free_in_steps(as_list, as_dict, as_set)
    assert (as_list, as_dict, as_set) == ([], {}, set())
    assert len(items) == 2000  # what others still hold is untouched
