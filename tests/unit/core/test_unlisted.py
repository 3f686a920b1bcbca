"""The keys a relist has yet to name: the same answer as a set, in any listing order, for less."""

from __future__ import annotations

import random
import sys

import pytest

from fabriccap.core.unlisted import UnlistedKeys


def _listings(held: list[tuple[str, str]], seed: int) -> list[list[tuple[str, str]]]:
    """Listings of ``held``: some keys gone, some new, in the keys' order, in etcd's byte order
    (``namespace/name``) and shuffled."""
    rng = random.Random(seed)
    listed = [key for key in held if rng.random() < 0.8] + [(f"ns{rng.randrange(9)}", f"new-{i}") for i in range(40)]
    shuffled = listed[:]
    rng.shuffle(shuffled)
    return [sorted(listed), sorted(listed, key=lambda key: f"{key[0]}/{key[1]}".encode()), shuffled]


@pytest.mark.parametrize("seed", range(5))
def test_what_a_listing_did_not_name_is_what_a_set_would_have_left(seed: int) -> None:
    rng = random.Random(seed)
    # Namespaces that are prefixes of others ("team", "team-a") sort differently as tuples and
    # as etcd's keys: that order is not the keys' own.
    namespaces = ["team", "team-a", "team.b", "kube-system", *(f"ns{i}" for i in range(9))]
    held = list({(rng.choice(namespaces), f"pod-{rng.randrange(10_000)}") for _ in range(2_000)})
    for listing in _listings(held, seed):
        unlisted = UnlistedKeys(held)
        left = set(held)
        for key in listing:
            unlisted.discard(key)
            left.discard(key)
        assert sorted(unlisted) == sorted(left)
        assert left  # the listings drop a fifth of what was held


def test_nothing_listed_leaves_everything_and_everything_listed_leaves_nothing() -> None:
    names = [f"node-{i}" for i in range(100)]
    assert sorted(UnlistedKeys(names)) == sorted(names)
    unlisted = UnlistedKeys(names)
    for name in reversed(names):
        unlisted.discard(name)
    assert list(unlisted) == []
    assert list(UnlistedKeys[str](())) == []


def test_a_key_held_twice_is_named_once_for_both() -> None:
    # The sharded store lists its nodes and another shard's together; a node in both is one node.
    unlisted = UnlistedKeys(["a", "b", "b", "c"])
    unlisted.discard("b")
    assert list(unlisted) == ["a", "c"]


def test_keeps_a_fraction_of_what_a_set_of_the_same_keys_took() -> None:
    keys = [("default", f"pod-{i}") for i in range(20_000)]
    unlisted = UnlistedKeys(keys)
    kept = sum(sys.getsizeof(getattr(unlisted, slot)) for slot in type(unlisted).__slots__)
    assert kept * 3 < sys.getsizeof(set(keys))
