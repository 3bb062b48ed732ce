"""What a soak does and when, drawn from its seed alone: the same seed is the same plan (a run
is replayed by giving its seed again). Pure: no cluster here.

A plan is the submissions (a job of a kind, into one of the two LocalQueues, at a priority, at
a second of the run) and the faults (a kind of fault at a second of the run; whom it strikes
is drawn when it happens, from what runs then, with the plan's own generator seeded from the
seed and the fault's index, so that it too is the same on a replay of the same cluster)."""

from __future__ import annotations

import random
from dataclasses import dataclass

QUEUES = ("team-a", "team-b")  # LocalQueues, one per namespace of the same names
PRIORITIES = ("soak-low", "soak-high")  # PriorityClasses: high preempts low in the queue


@dataclass(frozen=True)
class Size:
    """How big a soak is: ``jobs`` submitted over ``submit_seconds``, ``faults`` injected over
    ``fault_seconds`` (from ``first_fault``)."""

    jobs: int
    submit_seconds: float
    faults: int
    fault_seconds: float
    first_fault: float = 30.0
    concurrent: int = 4  # at most this many jobs not yet finished: submissions wait


DEFAULT = Size(jobs=60, submit_seconds=1500, faults=24, fault_seconds=1500)
SMALL = Size(jobs=6, submit_seconds=60, faults=4, fault_seconds=120, first_fault=40)


@dataclass(frozen=True)
class Submission:
    at: float
    name: str
    kind: str
    queue: str
    priority: str


@dataclass(frozen=True)
class FaultAt:
    at: float
    index: int
    kind: str

    def rng(self, seed: int) -> random.Random:
        """The generator that draws this fault's victim (the same for a replay)."""
        return random.Random(f"{seed}/{self.index}/{self.kind}")


@dataclass(frozen=True)
class Plan:
    seed: int
    size: Size
    submissions: tuple[Submission, ...]
    faults: tuple[FaultAt, ...]


def make_plan(seed: int, size: Size, kinds: list[str], faults: list[str]) -> Plan:
    """Every kind of job and of fault at least once (as far as the size allows), the rest drawn
    at random; the kinds in a random order, at random times."""
    rng = random.Random(seed)
    job_kinds = _cover(rng, kinds, size.jobs)
    times = sorted(rng.uniform(0, size.submit_seconds) for _ in job_kinds)
    submissions = tuple(
        Submission(
            at=round(t, 1),
            name=f"{kind}-{i:03d}",
            kind=kind,
            queue=QUEUES[i % len(QUEUES)],
            priority=rng.choice(PRIORITIES),
        )
        for i, (t, kind) in enumerate(zip(times, job_kinds, strict=True))
    )
    fault_kinds = _cover(rng, faults, size.faults)
    fault_times = sorted(size.first_fault + rng.uniform(0, size.fault_seconds) for _ in fault_kinds)
    planned = tuple(
        FaultAt(round(t, 1), i, kind)
        for i, (t, kind) in enumerate(zip(fault_times, fault_kinds, strict=True))
    )
    return Plan(seed, size, submissions, planned)


def _cover(rng: random.Random, names: list[str], count: int) -> list[str]:
    """``count`` names: each once first (shuffled; as many as fit), then drawn at random."""
    first = list(names)
    rng.shuffle(first)
    chosen = first[:count] + [rng.choice(names) for _ in range(count - len(first))]
    rng.shuffle(chosen)
    return chosen
