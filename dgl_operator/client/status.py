"""Reading a DGLJob's status (raw JSON in, typed values out): its phase, whether it ended and
how, and dglrun's progress (``status.progress``: ``1/5 partition`` ... ``5/5 train: epoch
3/10``, then ``done`` or ``failed in <phase>``; and ``status.progressDetail``: the percentage,
the ETAs and the last epoch's metrics)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dgljob.model import DGLJob, ProgressDetail

ENDED = ("Succeeded", "Failed")  # the condition types a job ends with

_STEP = re.compile(r"^(\d+)/(\d+) (\w+)")
_EPOCH = re.compile(r"epoch (\d+)/(\d+)")


def phase(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("phase") or "")


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The condition of that type when it is True, else None."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def ended(job: dict[str, Any]) -> str | None:
    """``Succeeded`` or ``Failed`` once the job ended, else None."""
    for kind in ENDED:
        if condition(job, kind):
            return kind
    return None


def reached(job: dict[str, Any], until: tuple[str, ...]) -> str | None:
    """The first of ``until`` the job is in: a condition type that is True (``Succeeded``,
    ``Running``, ``Suspended``, ...) or a phase (``Training``, ``Completed``, ...)."""
    p = phase(job)
    for want in until:
        if want == p or condition(job, want):
            return want
    return None


def failure(job: dict[str, Any]) -> tuple[str, str]:
    """(reason, message) of the Failed condition (or of the job's last word)."""
    c = condition(job, "Failed") or {}
    return str(c.get("reason") or "Failed"), str(c.get("message") or "")


@dataclass(frozen=True)
class JobProgress:
    """One reading of a job: its phase and dglrun's progress, parsed. ``epoch``/``epochs``
    once training reports them (``epoch`` as dglrun shows it); ``percentage``, ``eta`` (the
    ETA column's text), ``remaining`` (the job's seconds, None until known) and ``metrics``
    (the last epoch's) from ``status.progressDetail``."""

    phase: str
    text: str
    step: int | None = None
    steps: int | None = None
    step_name: str = ""
    epoch: int | None = None
    epochs: int | None = None
    restarts: int = 0
    ended: str | None = None
    percentage: int | None = None
    eta: str = ""
    remaining: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, job: dict[str, Any] | DGLJob) -> JobProgress:
        """The reading of a job: a raw object, or a typed one (its ``raw``)."""
        if isinstance(job, DGLJob):
            job = job.raw
        st = job.get("status") or {}
        detail = ProgressDetail.parse(st) or ProgressDetail()
        text = str(st.get("progress") or "")
        step = steps = epoch = epochs = None
        name = ""
        if m := _STEP.match(text):
            step, steps, name = int(m.group(1)), int(m.group(2)), m.group(3)
        if m := _EPOCH.search(text):
            epoch, epochs = int(m.group(1)), int(m.group(2))
        return cls(
            phase=phase(job),
            text=text,
            step=step,
            steps=steps,
            step_name=name,
            epoch=epoch,
            epochs=epochs,
            restarts=int(st.get("restartCount") or 0),
            ended=ended(job),
            percentage=detail.percentage if detail.steps else None,
            eta=detail.eta,
            remaining=detail.remaining,
            metrics=dict(detail.metrics),
        )

    def __str__(self) -> str:
        parts = [self.phase or "Pending"]
        if self.text:
            parts.append(self.text)
        if self.percentage is not None and not self.ended:
            parts.append(f"{self.percentage}%")
        if self.eta:
            parts.append(f"ETA {self.eta}")
        if self.restarts:
            parts.append(f"restarts {self.restarts}")
        return ", ".join(parts)
