"""Reading a DGLJob's status (raw JSON in, typed values out): its phase, whether it ended and
how, and dglrun's progress: ``status.progressDetail``, the values (the step, the epochs done
and their total, the percentage, the ETAs, the last epoch's metrics), read by
:func:`podcontract.progress.read`; ``status.progress``, its text
(``1/5 partition`` ... ``5/5 train: epoch 3/10``, then ``done`` or ``failed in <phase>``), is
shown as it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dgljob.model import DGLJob
from podcontract.progress import FROM_TEXT
from podcontract.progress import read as read_progress

ENDED = ("Succeeded", "Failed")  # the condition types a job ends with


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
    """One reading of a job: its phase and dglrun's progress, from ``status.progressDetail``:
    ``step``/``steps``/``step_name`` once dglrun is in a step; ``epochs`` once known (from the
    start) and ``epoch`` the epochs done of them; ``percentage``, ``eta`` (the ETA column's
    text), ``remaining`` (the job's seconds, None until known) and ``metrics`` (the last
    epoch's). ``text`` is ``status.progress``, for display. An older dglrun's status (no epochs
    in the detail) is read from its text; a detail not to be trusted is left out, and
    ``problem`` says why."""

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
    problem: str = ""

    @classmethod
    def of(cls, job: dict[str, Any] | DGLJob) -> JobProgress:
        """The reading of a job: a raw object, or a typed one (its ``raw``)."""
        if isinstance(job, DGLJob):
            job = job.raw
        st = job.get("status") or {}
        reading = read_progress(st)
        d = reading.detail
        in_step = d is not None and d.step > 0
        return cls(
            phase=phase(job),
            text=reading.text,
            step=d.step if d and in_step else None,
            steps=d.steps if d and in_step else None,
            step_name=d.step_name if d and in_step else "",
            epoch=d.epochs_done if d and d.epochs else None,
            epochs=d.epochs if d and d.epochs else None,
            restarts=int(st.get("restartCount") or 0),
            ended=ended(job),
            percentage=d.percentage if d and d.steps and reading.source != FROM_TEXT else None,
            eta=d.eta if d else "",
            remaining=d.remaining if d else None,
            metrics=dict(d.metrics) if d else {},
            problem=reading.problem,
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
        if self.problem:
            parts.append(self.problem)
        return ", ".join(parts)
