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


def test_progress_reads_the_detail_beside_the_text() -> None:
    detail = {"step": 1, "steps": 5, "stepName": "partition", "percentage": 12,
              "stepRemainingSeconds": 170, "metrics": {"loss": 0.5, "junk": "x"}}  # fmt: skip
    p = JobProgress.of(job(phase="Partitioning", progress="1/5 partition", progressDetail=detail))
    assert (p.percentage, p.eta, p.remaining) == (12, "partition ~2m50s", None)
    assert p.metrics == {"loss": 0.5}, "only numbers are kept"
    assert str(p) == "Partitioning, 1/5 partition, 12%, ETA partition ~2m50s"
    train = dict(detail, step=5, stepName="train", percentage=90, estimatedRemainingSeconds=45)
    t = JobProgress.of(job(phase="Training", progressDetail=train))
    assert (t.eta, t.remaining) == ("45s", 45)
    none = JobProgress.of(job(phase="Training", progressDetail="not an object"))
    assert (none.percentage, none.eta, none.metrics) == (None, "", {})


def test_reached_takes_conditions_and_phases_and_ended_says_how() -> None:
    running = job(phase="Training", conditions=[cond("Running"), cond("Succeeded", "False")])
    assert reached(running, ("Succeeded",)) is None
    assert reached(running, ("Succeeded", "Running")) == "Running"
    assert reached(running, ("Training",)) == "Training"
    assert ended(running) is None
    failed = job(phase="Failed", conditions=[cond("Failed", reason="OOMKilled", message="m")])
    assert ended(failed) == "Failed" and failure(failed) == ("OOMKilled", "m")


def test_the_plain_bar_shows_the_eta_and_metrics() -> None:
    import io

    from dgl_operator.client.bar import EpochBar

    out = io.StringIO()
    bar = EpochBar("gnn", out=out)
    bar._tqdm = None  # (the plain lines, tqdm installed or not)
    detail = {"step": 5, "steps": 5, "stepName": "train", "percentage": 90,
              "estimatedRemainingSeconds": 75, "metrics": {"epoch": 3, "loss": 0.41}}  # fmt: skip
    bar.update(JobProgress.of(job(phase="Training", progress="5/5 train: epoch 3/4",
                                  progressDetail=detail)))  # fmt: skip
    assert out.getvalue() == "gnn: Training 5/5 train ETA 1m15s epoch 3/4 loss 0.41\n"
