"""What every step of the lifecycle decides in (:class:`Context`) and what a step returns
(:class:`Next`).

A sync builds one context for the job it looks at and hands it, with the one
:class:`~controller.lifecycle.actions.Actions` object, to each step
:func:`controller.lifecycle.steps` yields in turn. A step reads the job, its pods and what they
show, decides into the plan (the new status, the events, when to look again), acts through the
actions, and says whether the sync goes on to the next step or is decided.

The context grows as the steps go: the spec is parsed by the ``invalid`` step (:attr:`job`),
what the attempt's pods show is observed by the ``observed`` step (:attr:`obs`); a step that
changes the job the later steps see (Kueue's admission, an elastic attempt's members) says so
with :meth:`Context.go_on_with`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from controller.api import DGLJob
from controller.machinery.plan import Plan
from controller.status import conditions
from controller.status.observation import Observation
from kubeclient import Obj


class Next(enum.Enum):
    """What a step says of the sync."""

    GO_ON = "go on"  # the next step looks at the job
    DONE = "done"  # decided: the status is written
    NOTHING = "nothing"  # nothing to decide yet (the caches lag our writes): no status write


@dataclass
class Context:
    """One sync of one job: what it reads, and the plan it decides into."""

    raw: Obj  # the DGLJob as read (the newest of the cache and our last write)
    plan: Plan
    now: float  # wall time: the status's stamps, deadlines and the TTL
    # the job's pods, every attempt's (set once the spec parsed)
    pods: list[Obj] = field(default_factory=list)
    # which attempt runs (the restarts and the attempts the features started,
    # controller/features/registry.py; set by ``observed``)
    attempt: int = 0
    # the lost nodes among those the attempt's active pods are bound to: name -> why
    lost: dict[str, str] = field(default_factory=dict)
    # the pods counted in status.replicaStatuses (None: the counts stay as they were)
    counted: Observation | None = None
    _job: DGLJob | None = None
    _obs: Observation | None = None

    @property
    def job(self) -> DGLJob:
        """The parsed job (the ``invalid`` step parsed it; only steps after it ask)."""
        assert self._job is not None, "the spec is parsed by the invalid step"
        return self._job

    @property
    def parsed(self) -> bool:
        return self._job is not None

    @property
    def obs(self) -> Observation:
        """What the attempt's pods show (the ``observed`` step; only steps after it ask)."""
        assert self._obs is not None, "the pods are observed by the observed step"
        return self._obs

    @property
    def status(self) -> Obj:
        """The status being decided (the plan's)."""
        return self.plan.status

    def go_on_with(self, job: DGLJob, obs: Observation | None = None) -> Next:
        """The later steps see ``job`` (and ``obs``, counted in replicaStatuses)."""
        self._job = job
        if obs is not None:
            self._obs = obs
            self.counted = obs
        return Next.GO_ON

    def set_condition(self, kind: str, value: bool, reason: str, message: str) -> bool:
        """Set a condition of the status being decided (True: it changed)."""
        return conditions.set_condition(self.plan.status, kind, value, reason, message, self.now)

    def not_running(self, reason: str, message: str) -> None:
        """Running False (once the job has had a Running condition)."""
        if conditions.get_condition(self.plan.status, conditions.RUNNING):
            self.set_condition(conditions.RUNNING, False, reason, message)
