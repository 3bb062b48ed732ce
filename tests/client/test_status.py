"""Reading a DGLJob's status: Progress, conditions, what a wait stops at (no server)."""

from __future__ import annotations

from typing import Any

from dgl_operator.client import JobProgress
from dgl_operator.client.status import ended, failure, reached


def job(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j"}, "status": status}


def cond(kind: str, status: str = "True", **kw: str) -> dict[str, str]:
    return {"type": kind, "status": status, **kw}


def test_progress_parses_dglruns_steps_and_epochs() -> None:
    p = JobProgress.of(job(phase="Training", progress="5/5 train: epoch 3/10", restartCount=1))
    assert (p.step, p.steps, p.step_name, p.epoch, p.epochs) == (5, 5, "train", 3, 10)
    assert p.restarts == 1 and p.ended is None
    assert str(p) == "Training, 5/5 train: epoch 3/10, restarts 1"
    d = JobProgress.of(job(phase="Partitioned", progress="3/5 dispatch: 210/420 MB"))
    assert (d.step, d.step_name, d.epoch) == (3, "dispatch", None)
    assert JobProgress.of(job()).phase == "" and str(JobProgress.of(job())) == "Pending"
    done = JobProgress.of(job(phase="Completed", progress="done", conditions=[cond("Succeeded")]))
    assert done.ended == "Succeeded" and done.step is None


def test_reached_takes_conditions_and_phases_and_ended_says_how() -> None:
    running = job(phase="Training", conditions=[cond("Running"), cond("Succeeded", "False")])
    assert reached(running, ("Succeeded",)) is None
    assert reached(running, ("Succeeded", "Running")) == "Running"
    assert reached(running, ("Training",)) == "Training"
    assert ended(running) is None
    failed = job(phase="Failed", conditions=[cond("Failed", reason="OOMKilled", message="m")])
    assert ended(failed) == "Failed" and failure(failed) == ("OOMKilled", "m")
