"""``status.progressDetail``: dglrun's progress as values a user (or a program) can act on.

``status.progress`` keeps its short text (``5/5 train: epoch 3/8``, the PROGRESS column);
beside it dglrun publishes this object, spelled here once for the writer (``launcher.report``)
and the readers (``dgljob``, and through it ``dgl_operator``'s client and ``dglctl``)::

    progressDetail:
      step: 5                        # the current step of dglrun, 1-based ...
      steps: 5                       # ... of this many
      stepName: train
      percentage: 71                 # of the whole job, 0-100
      stepRemainingSeconds: 95       # the current step's estimate (absent: none yet)
      estimatedRemainingSeconds: 95  # the job's (absent until every step left has one)
      eta: 1m35s                     # the ETA column: the job's, else "<step> ~<step's>"
      metrics: {epoch: 3, loss: 0.41, valAccuracy: 0.87, testAccuracy: 0.86,
                samplesPerSecond: 5210.0}

``metrics`` are the last epoch's, at most :data:`MAX_METRICS` numbers. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from podcontract import STATUS_PROGRESS_DETAIL

STEP = "step"
STEPS = "steps"
STEP_NAME = "stepName"
PERCENTAGE = "percentage"
STEP_REMAINING = "stepRemainingSeconds"
REMAINING = "estimatedRemainingSeconds"
ETA = "eta"
METRICS = "metrics"
# the metrics' names (trainer lines' ``loss``, ``val_acc``, ``test_acc``, ``nodes``/``time``)
EPOCH = "epoch"
LOSS = "loss"
VAL_ACCURACY = "valAccuracy"
TEST_ACCURACY = "testAccuracy"
SAMPLES_PER_SECOND = "samplesPerSecond"
MAX_METRICS = 8


def human(seconds: float) -> str:
    """``45s``, ``4m10s``, ``2h05m``: how an ETA reads in a column."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class ProgressDetail:
    step: int = 0
    steps: int = 0
    step_name: str = ""
    percentage: int = 0
    step_remaining: int | None = None
    remaining: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def eta(self) -> str:
        if self.remaining == 0 and self.percentage >= 100:
            return ""  # over: nothing left to wait for
        if self.remaining is not None:
            return human(self.remaining)
        if self.step_remaining is not None and self.step_name:
            return f"{self.step_name} ~{human(self.step_remaining)}"
        return ""

    def as_status(self) -> dict[str, Any]:
        """The object dglrun patches; absent estimates are ``None`` (a merge patch then
        removes what an earlier patch set)."""
        return {
            STEP: self.step,
            STEPS: self.steps,
            STEP_NAME: self.step_name,
            PERCENTAGE: self.percentage,
            STEP_REMAINING: self.step_remaining,
            REMAINING: self.remaining,
            ETA: self.eta or None,
            METRICS: dict(list(self.metrics.items())[:MAX_METRICS]) or None,
        }

    @classmethod
    def parse(cls, status: dict[str, Any] | None) -> ProgressDetail | None:
        """The detail of a DGLJob's ``status`` (None when it has none); fields of the wrong
        type are left out rather than trusted."""
        raw = (status or {}).get(STATUS_PROGRESS_DETAIL)
        if not isinstance(raw, dict):
            return None

        def whole(key: str) -> int | None:
            v = _number(raw.get(key))
            return None if v is None else int(v)

        given = raw.get(METRICS)
        metrics: dict[str, Any] = given if isinstance(given, dict) else {}
        return cls(
            step=whole(STEP) or 0,
            steps=whole(STEPS) or 0,
            step_name=str(raw.get(STEP_NAME) or ""),
            percentage=whole(PERCENTAGE) or 0,
            step_remaining=whole(STEP_REMAINING),
            remaining=whole(REMAINING),
            metrics={
                str(k): n
                for k, v in list(metrics.items())[:MAX_METRICS]
                if (n := _number(v)) is not None
            },
        )
