"""The features' own steps (controller/lifecycle/points.py), one entry each, made by the step's
module: at one point they run in this order. ``steps()`` (controller/lifecycle/__init__.py)
runs them at its points, the finished step at ``FINISHED``."""

from __future__ import annotations

from collections.abc import Iterator

from controller.lifecycle import elastic, queued
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.lifecycle.points import FeatureStep, Point

FEATURE_STEPS: tuple[FeatureStep, ...] = (*queued.STEPS, *elastic.STEPS)


def at(point: Point, ctx: Context, act: Actions) -> Iterator[Next]:
    """The steps the features run at ``point``, for a job they apply to, in order (each
    runs once the caller asks for the next)."""
    for step in FEATURE_STEPS:
        if step.at is point and step.applies(ctx, act):
            yield step.run(ctx, act)
