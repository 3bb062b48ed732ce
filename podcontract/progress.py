"""``status.progressDetail``: dglrun's progress as values a user (or a program) can act on.

``status.progress`` keeps its short text (``5/5 train: epoch 3/8``, the PROGRESS column);
beside it dglrun publishes this object, spelled here once for the writer (``launcher.report``)
and the readers (``dgljob``, and through it ``dgl_operator``'s client and ``dglctl``)::

    progressDetail:
      step: 5                        # the current step of dglrun, 1-based ...
      steps: 5                       # ... of this many
      stepName: train
      epochsDone: 3                  # the epochs trained so far (0 before training) ...
      epochs: 8                      # ... of this many (--num-epochs)
      percentage: 71                 # of the whole job, 0-100
      stepRemainingSeconds: 95       # the current step's estimate (absent: none yet)
      estimatedRemainingSeconds: 95  # the job's (absent until every step left has one)
      eta: 1m35s                     # the ETA column: the job's, else "<step> ~<step's>"
      metrics: {epoch: 3, loss: 0.41, valAccuracy: 0.87, testAccuracy: 0.86,
                samplesPerSecond: 5210.0}

``metrics`` are the last epoch's, at most :data:`MAX_METRICS` numbers.

The readers (the controller, which decides a DGLJob's phase from it; the client and
``dglctl``; soak and bench) take :func:`read`: the detail as values, checked (a field of the
wrong type or value makes the whole detail invalid, with a message naming it, never an
exception), and ``status.progress`` only for display. A dglrun older than the epochs fields
wrote the text alone, or a detail without them: then, and only then, the step and the epochs
come from the text, through :func:`from_old_text`, the one parser of it. Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from podcontract import PROGRESS_DONE, STATUS_PROGRESS, STATUS_PROGRESS_DETAIL

STEP = "step"
STEPS = "steps"
STEP_NAME = "stepName"
EPOCHS_DONE = "epochsDone"
EPOCHS = "epochs"
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
    epochs_done: int = 0  # the epochs trained so far (0 outside training) ...
    epochs: int = 0  # ... of this many (0: not known, from an older dglrun's text)

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
            EPOCHS_DONE: self.epochs_done,
            EPOCHS: self.epochs,
            PERCENTAGE: self.percentage,
            STEP_REMAINING: self.step_remaining,
            REMAINING: self.remaining,
            ETA: self.eta or None,
            METRICS: dict(list(self.metrics.items())[:MAX_METRICS]) or None,
        }

    @classmethod
    def parse(cls, status: Mapping[str, Any] | None) -> ProgressDetail | None:
        """The detail of a DGLJob's ``status`` as :func:`read` takes it (None: none, or
        invalid)."""
        return read(status).detail


_FIELD = f"status.{STATUS_PROGRESS_DETAIL}"  # (how the messages name it)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class DetailError(ValueError):
    """A field of ``status.progressDetail`` of the wrong type or value (the message names it)."""


def _whole(raw: Mapping[str, Any], key: str) -> int:
    """A non-negative whole number (``3`` or ``3.0``; not ``True``, ``"3"`` nor ``2.5``)."""
    value = raw.get(key)
    if value is None:
        raise DetailError(f"{_FIELD}.{key} is missing")
    n = _number(value)
    if n is None or not n.is_integer():
        raise DetailError(f"{_FIELD}.{key} is {_shown(value)}, not a whole number")
    if n < 0:
        raise DetailError(f"{_FIELD}.{key} is {_shown(value)}, below 0")
    return int(n)


def _estimate(raw: Mapping[str, Any], key: str) -> int | None:
    """An estimate: absent (None) or a non-negative whole number."""
    return None if raw.get(key) is None else _whole(raw, key)


def _metrics(given: object) -> dict[str, float]:
    """The numbers of ``metrics`` (any other value is left out)."""
    if not isinstance(given, dict):
        return {}
    return {
        str(k): n for k, v in list(given.items())[:MAX_METRICS] if (n := _number(v)) is not None
    }


def checked(raw: Mapping[str, Any]) -> ProgressDetail:
    """The detail a dglrun of this version wrote, every field checked (:class:`DetailError`)."""
    step, steps = _whole(raw, STEP), _whole(raw, STEPS)
    done, epochs = _whole(raw, EPOCHS_DONE), _whole(raw, EPOCHS)
    percentage = _whole(raw, PERCENTAGE)
    name = raw.get(STEP_NAME)
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise DetailError(f"{_FIELD}.{STEP_NAME} is {_shown(name)}, not a string")
    if step > steps:
        raise DetailError(f"{_FIELD}: {STEP} {step} is past {STEPS} {steps}")
    if done > epochs:
        raise DetailError(f"{_FIELD}: {EPOCHS_DONE} {done} is more than {EPOCHS} {epochs}")
    if percentage > 100:
        raise DetailError(f"{_FIELD}.{PERCENTAGE} is {percentage}, above 100")
    given = raw.get(METRICS)
    if given is not None and not isinstance(given, dict):
        raise DetailError(f"{_FIELD}.{METRICS} is {_shown(given)}, not an object")
    return ProgressDetail(
        step=step,
        steps=steps,
        step_name=name,
        percentage=percentage,
        step_remaining=_estimate(raw, STEP_REMAINING),
        remaining=_estimate(raw, REMAINING),
        metrics=_metrics(given),
        epochs_done=done,
        epochs=epochs,
    )


def _old_values(raw: Mapping[str, Any]) -> ProgressDetail:
    """A detail an older dglrun wrote (no epochs, which :func:`read` takes from its text):
    fields of the wrong type are left out rather than trusted."""

    def whole(key: str) -> int | None:
        v = _number(raw.get(key))
        return None if v is None else int(v)

    return ProgressDetail(
        step=whole(STEP) or 0,
        steps=whole(STEPS) or 0,
        step_name=str(raw.get(STEP_NAME) or ""),
        percentage=whole(PERCENTAGE) or 0,
        step_remaining=whole(STEP_REMAINING),
        remaining=whole(REMAINING),
        metrics=_metrics(raw.get(METRICS)),
    )


# -- the text an older dglrun wrote: its one parser ---------------------------------------------

_OLD_STEP = re.compile(r"^(?:failed in )?(\d+)/(\d+) (\w+)")
_OLD_EPOCH = re.compile(r"\bepoch (\d+)/(\d+)")


def from_old_text(text: str) -> ProgressDetail | None:
    """The step and the epochs of ``status.progress`` as a dglrun older than the epochs fields
    wrote it: ``1/5 partition``, ``3/5 dispatch: 210/420 MB``, ``5/5 train: epoch 3/10``,
    ``failed in 5/5 train``; ``done`` is the whole job done (100%, nothing left, no step).
    None for any other text (nothing reported yet). Only :func:`read` calls it, and only for
    such a dglrun's status."""
    if text == PROGRESS_DONE:
        return ProgressDetail(percentage=100, step_remaining=0, remaining=0)
    m = _OLD_STEP.match(text)
    if not m:
        return None
    step, steps = int(m.group(1)), int(m.group(2))
    e = _OLD_EPOCH.search(text)
    done, epochs = (int(e.group(1)), int(e.group(2))) if e else (0, 0)
    return ProgressDetail(step=step, steps=steps, step_name=m.group(3), epochs_done=done,
                          epochs=epochs)  # fmt: skip


# where a reading's values come from
FROM_DETAIL = "detail"  # this version's dglrun: the detail alone
FROM_OLD_DETAIL = "old detail"  # an older dglrun's detail; the epochs from its text
FROM_TEXT = "text"  # an older dglrun's text alone: the step and the epochs, no estimates


@dataclass(frozen=True)
class ProgressReading:
    """What a DGLJob's status says of dglrun's progress: ``detail``, the values to act on
    (None: nothing reported yet, or a detail not to be trusted, then ``problem`` says why);
    ``text``, ``status.progress``, for display only; ``source``, where the values come from
    (:data:`FROM_DETAIL`, :data:`FROM_OLD_DETAIL`, :data:`FROM_TEXT`; "" none)."""

    detail: ProgressDetail | None = None
    text: str = ""
    source: str = ""
    problem: str = ""


def read(status: Mapping[str, Any] | None) -> ProgressReading:
    """dglrun's progress in a DGLJob's ``status`` (never raises). A detail with the epochs
    fields (this version's dglrun) is taken as it is, every field checked. An older dglrun's
    status is read as before, with the text through :func:`from_old_text` for what it alone
    says: without a detail, the step and the epochs; beside a detail without the epochs, the
    epochs."""
    st = status or {}
    given = st.get(STATUS_PROGRESS)
    text = given if isinstance(given, str) else ""
    raw = st.get(STATUS_PROGRESS_DETAIL)
    if raw is not None and not isinstance(raw, dict):
        why = f"{_FIELD} is {_shown(raw)}, not an object"
        return ProgressReading(None, text, problem=f"{why}: ignored")
    if raw is not None and (EPOCHS in raw or EPOCHS_DONE in raw):
        try:
            return ProgressReading(checked(raw), text, FROM_DETAIL)
        except DetailError as e:
            return ProgressReading(None, text, problem=f"{e}: ignored")
    old = from_old_text(text)
    if raw is None:
        return ProgressReading(old, text, FROM_TEXT if old is not None else "")
    values = _old_values(raw)
    if old is not None:
        values = replace(values, epochs_done=old.epochs_done, epochs=old.epochs)
    return ProgressReading(values, text, FROM_OLD_DETAIL)
