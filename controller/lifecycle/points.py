"""How a feature (controller/features/) adds a step to the lifecycle: its step's module says
which feature it is of and at which named :class:`Point` of the lifecycle it runs
(:class:`FeatureStep`); controller/lifecycle/feature_steps.py lists them, and ``steps()``
(controller/lifecycle/__init__.py) runs each at its point, so the whole order reads in one
place.

The feature steps' modules stay in controller/lifecycle/ beside the others: a step decides in
a Context and acts through Actions (and may make children through the create step), which puts
it on the steps' floor (tests/test_layering.py, CONTROLLER_FLOORS), above controller/features/
(job logic, which the builders use). A feature's pure rules and its registry entry are in its
feature module; its acting is its step's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next


class Point(enum.Enum):
    """A named place in the lifecycle where the features' steps run."""

    # a finished job, once its pods were cleaned up and its TTL scheduled (the finished
    # step, before the spec is parsed: ``ctx.job`` is not there); what such a step returns
    # is not asked, the job is done
    FINISHED = "finished"
    # after suspended, before the attempt is observed: whether the job may start at all
    BEFORE_START = "before start"
    # after the deadline, before a lost node, a failed pod or success is looked at: what the
    # later steps see of the running attempt
    WHILE_RUNNING = "while running"


@dataclass(frozen=True)
class FeatureStep:
    """A feature's step: ``run`` at ``at``, for a job it ``applies`` to (else skipped)."""

    feature: str  # the feature's name (controller/features/registry.py)
    name: str  # the step's: its module in controller/lifecycle/
    at: Point
    applies: Callable[[Context, Actions], bool]
    run: Callable[[Context, Actions], Next]
