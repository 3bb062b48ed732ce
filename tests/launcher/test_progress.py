"""dglrun's progress text and its publisher (launcher/report/progress.py), with a recording
runner."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from launcher.console import NoProgress
from launcher.report.progress import (
    MAX_FAILURES,
    ProgressTarget,
    ReportProgress,
    Tracker,
    for_job,
    is_trainer,
)
from podcontract.progress import FROM_DETAIL, read
from tests.support.waiting import wait_for


def test_labels_of_trainers() -> None:
    assert is_trainer("job-worker-0/trainer-0") and is_trainer("train")
    assert not is_trainer("job-worker-0/server-0") and not is_trainer("partition")


def test_phases_and_epochs() -> None:
    t = Tracker(num_epochs=3)
    assert t.output("w/trainer-0", "epoch 0 loss 1") is None, "no phase yet"
    assert t.phase(5, 5, "train") == "5/5 train"
    assert t.output("w/server-0", "epoch 2") is None, "servers do not count"
    assert t.output("w/trainer-0", "rank 0 epoch 0 loss 0.9") == "5/5 train: epoch 1/3"
    assert t.output("w/trainer-1", "epoch 0 loss 0.8") is None, "no news"
    assert t.output("w/trainer-1", "Epoch 00001 | Loss 0.7") == "5/5 train: epoch 2/3"
    assert t.output("w/trainer-0", "epochs: 9") is None, "'epoch' must be a word"
    assert t.output("w/trainer-0", "epoch 7") == "5/5 train: epoch 3/3", "capped"
    assert t.text == "5/5 train: epoch 3/3" and t.current_phase == "5/5 train"
    assert t.phase(5, 5, "train") == "5/5 train", "a new phase starts from 0 epochs"


def test_the_detail_carries_the_epochs_the_text_shows() -> None:
    """``epochsDone`` of ``epochs`` in the detail, beside the text's ``epoch <done>/<total>``:
    the total from the start, the count as the text counts it (capped, reset per step); read
    back by the readers' one function, the two agree at every line."""
    t = Tracker(num_epochs=3)
    d = t.detail()
    assert (d.epochs_done, d.epochs) == (0, 3), "the total is known before any step"
    t.phase(5, 5, "train")
    for line in ("epoch 0 loss 1", "Epoch 00001 | Loss 0.7", "epoch 7"):
        t.output("w/trainer-0", line)
        d = t.detail()
        reading = read({"progress": t.text, "progressDetail": d.as_status()})
        assert reading.detail == d and reading.source == FROM_DETAIL, reading
        assert t.text == f"5/5 train: epoch {d.epochs_done}/{d.epochs}"
    assert d.epochs_done == 3, "capped at --num-epochs, as the text"
    t.phase(5, 5, "train")
    assert t.detail().epochs_done == 0, "a new phase starts from 0 epochs"
    t.output("w/trainer-0", "epoch 1")
    assert (t.detail("done").epochs_done, t.detail("done").percentage) == (2, 100)


class Runner:
    def __init__(self, code: int = 0, stderr: str = "") -> None:
        self.code, self.stderr = code, stderr
        self.calls: list[list[str]] = []
        self.first = threading.Event()

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        self.first.set()
        return subprocess.CompletedProcess(argv, self.code, "", self.stderr)

    def docs(self, reporter: str = "launcher") -> list[dict[str, Any]]:
        """Each report sent: the reporter's document in the ConfigMap's data."""
        return [json.loads(json.loads(a[-1])["data"][reporter]) for a in self.calls]

    def texts(self) -> list[str]:
        return [d["status"]["progress"] for d in self.docs()]


def test_patch_command() -> None:
    """dglrun patches its key of the job's report ConfigMap, never the DGLJob."""
    run = Runner()
    p = ReportProgress("/opt/kube/kubectl", "job", 2, print, attempt=3, run=run)
    p.phase(3, 5, "dispatch")
    assert run.first.wait(10)
    p.finish("done")
    assert run.calls[0][:-1] == [
        "/opt/kube/kubectl",
        "patch",
        "configmap",
        "job-report",
        "--type=merge",
        "-p",
    ]
    assert list(json.loads(run.calls[0][-1])) == ["data"]
    assert run.docs()[0] == {
        "attempt": 3,
        "events": [],
        "status": {
            "progress": "3/5 dispatch",
            "progressDetail": {"step": 3, "steps": 5, "stepName": "dispatch", "epochsDone": 0,
                               "epochs": 2, "percentage": 40, "stepRemainingSeconds": None,
                               "estimatedRemainingSeconds": None, "eta": None, "metrics": None},
        },
    }  # fmt: skip
    assert run.texts() == ["3/5 dispatch", "done"] == p.published
    done = run.docs()[-1]["status"]["progressDetail"]
    assert (done["percentage"], done["estimatedRemainingSeconds"], done["eta"]) == (100, 0, None)
    assert (done["epochsDone"], done["epochs"]) == (0, 2), "no epoch line: none counted"


def test_the_partitioner_reports_under_its_own_key() -> None:
    run = Runner()
    p = ReportProgress("kubectl", "job", 2, print, reporter="partitioner", run=run)
    p.phase(1, 5, "partition")
    p.finish(None)
    assert list(json.loads(run.calls[0][-1])["data"]) == ["partitioner"]
    assert run.docs("partitioner")[0]["status"]["progress"] == "1/5 partition"


def test_events_go_out_in_the_report_numbered() -> None:
    """An Event dglrun asks for travels with the report (the pods may create no Events), each
    with its number; only the last MAX_EVENTS are kept."""
    run = Runner()
    p = ReportProgress("kubectl", "job", 2, print, interval=0, run=run)
    p.phase(5, 5, "train")
    assert run.first.wait(10)
    p.event("Normal", "Resuming", "Resuming at epoch 1 from the checkpoint x")
    deadline = time.monotonic() + 10
    while not any(d["events"] for d in run.docs()) and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(40):
        p.event("Warning", "CheckpointSkipped", f"skipped {i}")
    p.finish(None)
    events = run.docs()[-1]["events"]
    assert len(events) == 32 and [e["seq"] for e in events] == list(range(10, 42))
    assert events[-1] == {"seq": 41, "type": "Warning", "reason": "CheckpointSkipped",
                          "message": "skipped 39"}  # fmt: skip
    first = [e for d in run.docs() for e in d["events"] if e["seq"] == 1]
    assert first and first[0]["reason"] == "Resuming", "the first event went out before"


def test_updates_are_throttled_and_the_last_one_wins() -> None:
    run = Runner()
    p = ReportProgress("kubectl", "job", 100, print, interval=3600, run=run)
    p.phase(5, 5, "train")
    assert run.first.wait(10)
    for epoch in range(100):
        p.output("w/trainer-0", f"epoch {epoch}")
    p.finish(None)  # no outcome: what is pending still goes out
    assert run.texts() == ["5/5 train", "5/5 train: epoch 100/100"]


def test_fields_recorded_after_the_last_patch_still_go_out() -> None:
    """The partitioner records its measured peaks after its last phase: finishing without
    an outcome sends them with the text already published."""
    run = Runner()
    p = ReportProgress("kubectl", "job", 1, print, interval=0, run=run)
    p.phase(2, 5, "deliver")
    assert run.first.wait(10)
    p.record("memory", {"partition": {"peakMiB": 1130}})
    p.finish(None)
    assert run.texts() == ["2/5 deliver", "2/5 deliver"]
    assert run.docs()[-1]["status"]["memory"] == {"partition": {"peakMiB": 1130}}
    quiet = Runner()
    q = ReportProgress("kubectl", "job", 1, print, interval=0, run=quiet)
    q.phase(2, 5, "deliver")
    assert quiet.first.wait(10)
    q.finish(None)  # nothing new: no second patch
    assert quiet.texts() == ["2/5 deliver"]


def test_failed_names_the_phase() -> None:
    run = Runner()
    p = ReportProgress("kubectl", "job", 1, print, interval=3600, run=run)
    p.phase(4, 5, "configure")
    p.finish("failed")
    assert run.texts()[-1] == "failed in 4/5 configure"


def test_refusals_warn_once_then_stop_trying() -> None:
    run = Runner(code=1, stderr='Error from server (Forbidden): "job" is forbidden')
    warned: list[str] = []
    p = ReportProgress("kubectl", "job", 1, warned.append, interval=0, run=run)
    for k in range(1, 6):
        p.phase(k, 5, f"p{k}")
        deadline = time.monotonic() + 10
        while len(run.calls) < min(k, MAX_FAILURES) and time.monotonic() < deadline:
            time.sleep(0.01)
    p.finish("done")
    assert len(run.calls) == MAX_FAILURES, "it kept trying after the limit"
    assert len(warned) == 2 and "Forbidden" in warned[0], warned
    assert "progress reporting stopped" in warned[1]
    assert p.published == []


def test_an_unreachable_api_server_is_waited_for_and_the_latest_report_goes_through() -> None:
    """An API server restart (issue 58): kubectl cannot connect. Unlike a refusal (the twin,
    test_refusals_warn_once_then_stop_trying) the report keeps trying, well past
    MAX_FAILURES, with what is latest; once the server answers, the latest report (the
    phase reached meanwhile) goes through, and dglrun says so."""
    down = "Unable to connect to the server: dial tcp 10.0.0.1:6443: connect: connection refused"
    run = Runner(code=1, stderr=down)
    warned: list[str] = []
    p = ReportProgress("kubectl", "job", 1, warned.append, interval=0, run=run)
    p.phase(3, 5, "dispatch")
    wait_for(lambda: len(run.calls) > MAX_FAILURES, what="retries past MAX_FAILURES", timeout=30)
    p.phase(5, 5, "train")  # (while the server is away)
    run.code, run.stderr = 0, ""
    wait_for(lambda: p.published, what="a report once the server is back", timeout=30)
    p.finish(None)
    assert p.published[0] == "5/5 train", p.published
    assert len([w for w in warned if "cannot reach the API server" in w]) == 1, warned
    assert any("answers again" in w for w in warned), warned
    assert not any("progress reporting stopped" in w for w in warned), warned


def test_a_missing_kubectl_is_a_warning(tmp_path: Path) -> None:
    warned: list[str] = []
    p = ReportProgress(str(tmp_path / "nope"), "job", 1, warned.append)
    p.finish("done")
    assert warned and "cannot report progress to DGLJob job" in warned[0]


def test_for_job(tmp_path: Path) -> None:
    kubectl = tmp_path / "kubectl"
    assert isinstance(for_job(ProgressTarget("j"), str(kubectl), 1, print), NoProgress)
    kubectl.write_text("#!/bin/sh\n")
    assert isinstance(for_job(ProgressTarget(), str(kubectl), 1, print), NoProgress)
    p = for_job(ProgressTarget("j", "u", "ns", 4), str(kubectl), 1, print, "partitioner")
    assert isinstance(p, ReportProgress)
    assert (p.job, p.attempt, p.reporter) == ("j", 4, "partitioner")
    p.finish(None)


def test_the_estimates_are_published_again_as_they_move() -> None:
    """Between events a step's ETA counts down: with nothing new to say, the detail alone goes
    out again once per refresh, and not at all when it did not move (a step with no estimate)."""
    run = Runner()
    p = ReportProgress("kubectl", "job", 4, print, interval=0, refresh=0.05, run=run)
    p.phase(5, 5, "train")
    p.output("w/trainer-0", "epoch 0 loss 1.0 nodes 100 time 30.00s")
    deadline = time.monotonic() + 10
    while len(run.calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    p.finish("failed")
    details = [d["status"]["progressDetail"] for d in run.docs()]
    left = [d["estimatedRemainingSeconds"] for d in details if d["stepRemainingSeconds"]]
    assert len(left) >= 2 and left[0] == 90, left  # 3 epochs left of 30 s each
    assert run.texts()[-1] == "failed in 5/5 train"
    assert details[-1]["eta"] is None and details[-1]["estimatedRemainingSeconds"] is None

    idle = Runner()
    q = ReportProgress("kubectl", "job", 1, print, interval=0, refresh=0.01, run=idle)
    q.phase(4, 5, "configure")
    assert idle.first.wait(10)
    time.sleep(0.2)  # ~20 refreshes: nothing moved, nothing sent
    q.finish(None)
    assert idle.texts() == ["4/5 configure"]
