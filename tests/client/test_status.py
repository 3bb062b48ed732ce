"""Reading a DGLJob's status: Progress, conditions, what a wait stops at (no server)."""

from __future__ import annotations

from typing import Any

import pytest

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


TYPED = {"step": 5, "steps": 5, "stepName": "train", "epochsDone": 3, "epochs": 10,
         "percentage": 86, "estimatedRemainingSeconds": 75,
         "metrics": {"epoch": 3, "loss": 0.4}}  # fmt: skip


def test_progress_reads_the_typed_detail_and_shows_the_text_as_it_is() -> None:
    """This dglrun's status: step and epochs from the detail, whatever the text says (here a
    text that lags behind: it is shown, never parsed)."""
    p = JobProgress.of(job(phase="Training", progress="1/5 partition", progressDetail=TYPED))
    assert (p.step, p.steps, p.step_name, p.epoch, p.epochs) == (5, 5, "train", 3, 10)
    assert (p.percentage, p.eta, p.remaining, p.problem) == (86, "1m15s", 75, "")
    assert str(p) == "Training, 1/5 partition, 86%, ETA 1m15s"
    early = dict(TYPED, step=1, stepName="partition", epochsDone=0, percentage=4)
    del early["estimatedRemainingSeconds"]
    e = JobProgress.of(job(phase="Partitioning", progress="5/5 train", progressDetail=early))
    assert (e.step, e.step_name, e.epoch, e.epochs) == (1, "partition", 0, 10), "total known"


def test_an_older_dglruns_detail_takes_its_epochs_from_the_text() -> None:
    old = {k: v for k, v in TYPED.items() if k not in ("epochsDone", "epochs")}
    p = JobProgress.of(job(phase="Training", progress="5/5 train: epoch 2/10", progressDetail=old))
    assert (p.step, p.epoch, p.epochs, p.percentage, p.eta) == (5, 2, 10, 86, "1m15s")


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"epochsDone": 11}, "epochsDone 11 is more than epochs 10"),
        ({"epochs": "ten"}, "epochs is 'ten', not a whole number"),
        ({"step": 2.5}, "step is 2.5, not a whole number"),
        ({"percentage": -3}, "percentage is -3, below 0"),
        ({"estimatedRemainingSeconds": "soon"}, "estimatedRemainingSeconds is 'soon'"),
        ({"epochs": None}, "epochs is missing"),
    ],
)
def test_a_bad_detail_is_left_out_with_a_message(bad: dict[str, Any], named: str) -> None:
    """A detail with a field of the wrong type or value: no step, epochs, percentage, ETA nor
    metrics from it (nor from the text beside it); the reading says why, and so do its line
    and the bar; nothing raises."""
    p = JobProgress.of(job(phase="Training", progress="5/5 train: epoch 3/10",
                           progressDetail=dict(TYPED, **bad)))  # fmt: skip
    assert (p.step, p.epoch, p.epochs, p.percentage, p.eta, p.metrics) == (
        None, None, None, None, "", {})  # fmt: skip
    assert named in p.problem and p.problem.startswith("status.progressDetail"), p.problem
    assert str(p) == f"Training, 5/5 train: epoch 3/10, {p.problem}"
    import io

    from dgl_operator.client.bar import EpochBar

    out = io.StringIO()
    bar = EpochBar("gnn", out=out)
    bar._tqdm = None
    bar.update(p)
    assert out.getvalue() == f"gnn: Training ({p.problem})\n"


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
    bar.update(JobProgress.of(job(phase="Training", progress="5/5 train: epoch 1/4",
                                  progressDetail=TYPED)))  # fmt: skip
    assert out.getvalue().splitlines()[-1] == (
        "gnn: Training 5/5 train ETA 1m15s epoch 3/10 loss 0.4"
    ), "the detail's epochs, not the text's"


def test_a_refused_model_is_the_clients_error_naming_the_file() -> None:
    """A job failed FileRefused (a process refused a model or checkpoint on the claim): what a
    wait raises says so in one line, the operator's quote naming the file."""
    from dgl_operator.client import JobFailed

    model = "/dgl_storage/runs/j-1a2b3c4d/output/model.pt"
    message = (
        f"evaluate.py: error: {model} is refused: it holds more than tensors and plain values, "
        "and loading it could run code (Unsupported class posix.system) (reported by launcher "
        "pod j-launcher)"
    )
    failed = job(phase="Failed", conditions=[cond("Failed", reason="FileRefused", message=message)])
    assert ended(failed) == "Failed"
    error = JobFailed("j", *failure(failed), failed)
    assert str(error) == f"dgljob j failed: FileRefused: {message}"
    assert "\n" not in str(error) and model in str(error)
