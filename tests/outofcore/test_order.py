"""outofcore.order: an epoch's buffer states (issue 59, part 3). Each property is checked by
:func:`problems`, and each check is shown to catch a plan that breaks it."""

from __future__ import annotations

import itertools

import pytest

from outofcore.order import State, co_resident, physical_partitions, plan_epoch, residence


def problems(states: list[State], num_logical: int, per_physical: int, capacity: int) -> list[str]:
    """What is wrong with an epoch's plan: a partition trained or read other than once, more
    resident than the buffer holds, a state's trained or read partitions not resident, or a
    state's residents not the last one's plus what it read (less one physical partition)."""
    found = []
    trained = sorted(p for s in states for p in s.train)
    if trained != list(range(num_logical)):
        found.append(f"trained other than once each: {trained}")
    read = sorted(p for s in states for p in s.load)
    if read != list(range(num_logical)):
        found.append(f"read other than once each: {read}")
    room = capacity * per_physical
    before: set[int] = set()
    for k, s in enumerate(states):
        here = set(s.resident)
        if len(here) > room:
            found.append(f"state {k}: {len(here)} resident, room for {room}")
        if not set(s.train) <= here or not set(s.load) <= here:
            found.append(f"state {k}: trains or reads what is not resident")
        if k and not (here - set(s.load)) <= before:
            found.append(f"state {k}: residents appeared without being read")
        before = here
    return found


@pytest.mark.parametrize(
    ("num_logical", "per_physical", "capacity"),
    [(16, 2, 2), (16, 2, 3), (10, 3, 2), (7, 1, 4), (4, 2, 8), (1, 1, 1), (9, 4, 1)],
)
def test_every_partition_is_read_and_trained_once_within_the_buffer(
    num_logical: int, per_physical: int, capacity: int
) -> None:
    for epoch in range(5):
        states = plan_epoch(num_logical, per_physical, capacity, seed=7, epoch=epoch)
        assert problems(states, num_logical, per_physical, capacity) == []
        physical = -(-num_logical // per_physical)
        assert len(states) == max(1, physical - capacity + 1)


def test_each_check_catches_the_plan_it_forbids() -> None:
    good = plan_epoch(8, 2, 2, seed=1, epoch=0)
    assert problems(good, 8, 2, 2) == []
    twice = [*good, State(good[-1].resident, (), good[-1].train)]
    assert any("trained other than once" in p for p in problems(twice, 8, 2, 2))
    reread = [*good[:-1], State(good[-1].resident, good[-1].resident, good[-1].train)]
    assert any("read other than once" in p for p in problems(reread, 8, 2, 2))
    assert any("room for 2" in p for p in problems(good, 8, 2, 1))  # (planned for 2 physical)
    stray = [*good[:-1], State(good[-1].resident, good[-1].load, (*good[-1].train, 99))]
    assert any("not resident" in p for p in problems(stray, 8, 2, 2))
    unread = [good[0], State(tuple(range(8)), good[1].load, good[1].train), *good[2:]]
    assert any("without being read" in p for p in problems(unread, 8, 2, 2))


def test_the_plan_is_the_seed_and_the_epoch_alone() -> None:
    """Every worker computes every worker's states: the same arguments, the same plan (in any
    process: a str seed, not Python's salted hash); another epoch or seed, another plan."""
    a = plan_epoch(16, 2, 3, seed=5, epoch=3)
    assert a == plan_epoch(16, 2, 3, seed=5, epoch=3)
    assert physical_partitions(6, 2, seed=0, epoch=0) == [[0, 5], [1, 4], [2, 3]]  # pinned
    assert a != plan_epoch(16, 2, 3, seed=5, epoch=4)
    assert a != plan_epoch(16, 2, 3, seed=6, epoch=3)


def test_over_epochs_every_two_partitions_share_the_buffer() -> None:
    """COMET's point: the grouping is drawn again each epoch, so no pair of logical partitions
    is kept apart for good. The twin: one fixed grouping (every epoch the same) leaves pairs
    that never meet."""
    everyone = set(itertools.combinations(range(16), 2))
    seen: set[tuple[int, int]] = set()
    for epoch in range(20):
        seen |= co_resident(plan_epoch(16, 2, 2, seed=11, epoch=epoch))
    assert seen == everyone
    fixed = co_resident(plan_epoch(16, 2, 2, seed=11, epoch=0))
    assert fixed != everyone and len(fixed) < len(everyone) // 2


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ((0, 2, 2), "num_logical"),
        ((8, 0, 2), "per_physical"),
        ((8, 2, 0), "capacity"),
        ((8, 2, True), "capacity"),
        ((8, 2.5, 2), "per_physical"),
    ],
)
def test_a_bad_size_is_an_error_naming_it(args: tuple[int, int, int], named: str) -> None:
    with pytest.raises(ValueError, match=rf"^{named} must be a whole number of at least 1"):
        plan_epoch(*args, seed=0, epoch=0)


def test_each_partition_is_resident_in_the_states_residence_names() -> None:
    states = plan_epoch(16, 2, 3, seed=0, epoch=1)
    found = residence(states, 16)
    for p, where in enumerate(found):
        assert where, f"partition {p} resident nowhere"
        assert all(p in states[k].resident for k in where)
        assert [k for k, s in enumerate(states) if p in s.resident] == where
    # (a partition of the first state stays resident in the states after it: more than one)
    assert max(len(w) for w in found) > 1
