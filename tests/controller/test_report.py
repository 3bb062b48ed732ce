"""dglrun's report (podcontract/report.py), read as the operator reads it: every attack a
pod of the job could write into its report is refused or ignored, each beside a well-formed
twin that is taken (so each check is shown to catch what it forbids, and only that)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubeclient import CONFIGMAPS
from podcontract import report
from tests.controller.harness import LAUNCH, MAIN, NS, W0, Harness, poke, seed, train
from tests.support.waiting import wait_for

J = MAIN

RUN = "job-1234abcd"
DETAIL = {"step": 5, "steps": 5, "stepName": "train", "epochsDone": 3, "epochs": 8,
          "percentage": 71}  # fmt: skip


def doc(attempt: int = 0, events: list[Any] | None = None, **status: Any) -> str:
    return json.dumps({"attempt": attempt, "status": status, "events": events or []})


def test_the_running_attempts_fields_are_copied() -> None:
    data = {"launcher": doc(2, progress="5/5 train: epoch 3/8", progressDetail=DETAIL,
                            deliveryBytes=1000, deliverySeconds=0.5)}  # fmt: skip
    got = report.read(data, 2, RUN)
    assert got.problems == []
    assert got.status == {"progress": "5/5 train: epoch 3/8", "progressDetail": DETAIL,
                          "deliveryBytes": 1000, "deliverySeconds": 0.5}  # fmt: skip


def test_another_attempts_report_is_ignored() -> None:
    """An old launcher (or a pod claiming to be of another attempt) says nothing now."""
    data = {"launcher": doc(1, progress="done")}
    assert report.read(data, 2, RUN).status == {}
    assert report.read(data, 1, RUN).status == {"progress": "done"}  # (the twin)


@pytest.mark.parametrize(
    "forged",
    [
        {"conditions": [{"type": "Succeeded", "status": "True"}]},
        {"phase": "Succeeded"},
        {"completionTime": "2026-01-01T00:00:00Z"},
        {"queue": None},
        {"startTime": "2020-01-01T00:00:00Z"},
        {"restartCount": 0},
        {"transferSecret": "another-jobs-secret"},
        {"elastic": {"growTo": 64}},
    ],
)
def test_what_the_operator_decides_on_is_never_taken(forged: dict[str, Any]) -> None:
    """The attack of issue 57: the job's code finishing its job (or leaving its queue, moving
    its clock, naming a Secret) through what dglrun reports."""
    got = report.read({"launcher": doc(0, progress="3/5 dispatch", **forged)}, 0, RUN)
    key = next(iter(forged))
    assert key not in got.status and got.status == {"progress": "3/5 dispatch"}
    assert got.problems == [f"launcher: status.{key} is not a field dglrun reports"]


@pytest.mark.parametrize(
    ("field", "bad", "good", "why"),
    [
        ("progressDetail", {**DETAIL, "epochsDone": 9}, DETAIL, "epochsDone 9 is more than"),
        ("progressDetail", "71%", DETAIL, "not an object"),
        ("progress", "x" * 300, "x" * 256, "not a printable string"),
        ("progress", "line\nbreak", "5/5 train", "not a printable string"),
        ("deliveryBytes", -1, 0, "outside 0.."),
        ("deliveryBytes", 1.5, 2, "not a whole number"),
        ("deliveryBytes", True, 1, "not a number"),
        ("deliverySeconds", float("inf"), 1e6, "outside 0.."),
        ("partitionSeconds", "12", 12, "not a number"),
        ("memory", {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}, {"a": {"b": 1}},
         "nested deeper than"),
        ("memory", {"x": "y" * 20000}, {"x": "y" * 1000}, "larger than"),
        ("partitions", {"key": "../../etc", "path": "p", "reused": True},
         {"key": "abc123", "path": "cache/abc123", "reused": True}, "not a cache key"),
        ("partitions", {"key": "abc", "path": "p", "reused": "yes"},
         {"key": "abc", "path": "p", "reused": False}, "not true or false"),
    ],
)  # fmt: skip
def test_each_field_is_checked(field: str, bad: Any, good: Any, why: str) -> None:
    refused = report.read({"launcher": doc(0, **{field: bad})}, 0, RUN)
    assert field not in refused.status
    assert len(refused.problems) == 1 and why in refused.problems[0], refused.problems
    assert refused.problems[0].startswith(f"launcher: status.{field}")
    taken = report.read({"launcher": doc(0, **{field: good})}, 0, RUN)
    assert taken.problems == [] and taken.status == {field: good}


@pytest.mark.parametrize(
    "where",
    [
        "runs/other-job-9999aaaa/checkpoints/epoch-3.pt",  # another job's run folder
        f"runs/{RUN}/../other-job-9999aaaa/checkpoints/epoch-3.pt",
        f"runs/{RUN}/checkpoints/../../../etc/passwd",
        "/etc/passwd",
        f"runs/{RUN}/",
        f"runs/{RUN}/checkpoints/.hidden",
    ],
)
def test_a_resume_point_must_be_a_file_of_the_jobs_own_run_folder(where: str) -> None:
    bad = report.read({"launcher": doc(0, resume={"epoch": 3, "checkpoint": where})}, 0, RUN)
    assert "resume" not in bad.status
    assert "is not a file of the job's run folder" in bad.problems[0]
    good = {"epoch": 3, "checkpoint": f"runs/{RUN}/checkpoints/epoch-3.pt"}
    assert report.read({"launcher": doc(0, resume=good)}, 0, RUN).status == {"resume": good}


def test_the_launchers_fields_win_over_the_partitioners() -> None:
    data = {"partitioner": doc(0, progress="2/5 deliver", partitionSeconds=3.5),
            "launcher": doc(0, progress="3/5 dispatch")}  # fmt: skip
    assert report.read(data, 0, RUN).status == {"progress": "3/5 dispatch", "partitionSeconds": 3.5}


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("[" * 30_000 + "]" * 30_000, "not a JSON object of at most"),
        ("x" * (report.MAX_DOCUMENT + 1), "larger than"),
        ("{not json", "not JSON"),
        (json.dumps(["a list"]), "not a JSON object"),
        (json.dumps({"attempt": "0", "status": {}}), "attempt is '0'"),
        (json.dumps({"attempt": 0, "status": ["x"]}), "status is ['x'], not an object"),
    ],
)
def test_a_document_that_cannot_be_read_is_said_never_raised(raw: str, why: str) -> None:
    if raw.startswith("[["):
        with pytest.raises(RecursionError):  # (what the depth check spares the operator)
            json.loads(raw)
    got = report.read({"launcher": raw, "partitioner": doc(0, progress="2/5 deliver")}, 0, RUN)
    assert len(got.problems) == 1 and why in got.problems[0], got.problems
    assert got.status == {"progress": "2/5 deliver"}, "the other reporter still counts"


def test_events_are_checked_and_bounded() -> None:
    good: dict[str, Any] = {"seq": 1, "type": "Normal", "reason": "Resuming", "message": "x"}
    bad: list[Any] = [
        {**good, "seq": 0},
        {**good, "type": "Error"},
        {**good, "reason": "not camel"},
        {**good, "message": "m" * 2000},
        "an event",
    ]
    got = report.read({"launcher": doc(0, events=[good, *bad])}, 0, RUN)
    assert got.events == [report.ReportEvent("launcher", 1, "Normal", "Resuming", "x")]
    assert len(got.problems) == len(bad), got.problems
    many = [{**good, "seq": i} for i in range(1, 41)]
    got = report.read({"launcher": doc(0, events=many)}, 0, RUN)
    assert len(got.events) == report.MAX_EVENTS and "only the first 32" in got.problems[0]


def test_what_dglrun_writes_reads_back() -> None:
    """The writer's format (launcher.report.progress uses report.document) is the reader's."""
    event = {"seq": 1, "type": "Normal", "reason": "Resuming", "message": "m"}
    raw = report.document(4, {"progress": "done", "progressDetail": DETAIL}, [event])
    got = report.read({"launcher": raw}, 4, RUN)
    assert got.problems == [] and got.status["progress"] == "done" and len(got.events) == 1


# -- the operator's side: the sync copies the report (the harness plays dglrun and the kubelet)


def _write_report(h: Harness, reporter: str, raw: str) -> None:
    h.kube.patch(CONFIGMAPS, NS, f"{J}-report", {"data": {reporter: raw}})


def test_the_jobs_code_cannot_finish_its_job_through_its_report(h: Harness) -> None:
    """The attack of issue 57, on the operator: a launcher whose code writes Succeeded (and a
    queue erased, a clock moved back) into what it may write. The job keeps running; the
    forgery is said (Reported False, a Warning quoting it); the progress beside it is taken."""
    h.create_job(seed(runPolicy={"backoffLimit": 1}))
    train(h)
    start = h.status()["startTime"]
    forged = {
        "progress": "5/5 train: epoch 2/8",
        "phase": "Succeeded",
        "startTime": "2020-01-01T00:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "Forged"}],
    }
    _write_report(h, "launcher", report.document(0, forged, []))
    wait_for(lambda: h.status().get("progress") == "5/5 train: epoch 2/8", what="the progress")
    refused = h.wait_condition_status("Reported", "False")
    assert refused["reason"] == "ReportRefused"
    for key in ("phase", "startTime", "conditions"):
        assert f"status.{key} is not a field dglrun reports" in refused["message"]
    wait_for(lambda: "ReportRefused" in h.event_reasons(), what="the Warning")
    h.settle()
    assert h.status()["phase"] == "Training" and h.status()["startTime"] == start
    assert h.condition("Succeeded") is None and LAUNCH in h.pods()
    # the twin: the same launcher reporting only what it may, and the report passes again
    _write_report(h, "launcher", report.document(0, {"progress": "5/5 train: epoch 3/8"}, []))
    wait_for(lambda: h.status().get("progress") == "5/5 train: epoch 3/8", what="the progress")
    assert h.wait_condition_status("Reported", "True")["reason"] == "ReportAccepted"
    h.finish_pod(LAUNCH, seconds=100)
    h.wait_condition("Succeeded")  # (only the launcher's end finishes the job)


def test_the_events_asked_for_are_recorded_once_and_another_attempts_report_is_ignored(
    h: Harness,
) -> None:
    h.create_job(seed(runPolicy={"backoffLimit": 1}))
    train(h)
    event = {"seq": 1, "type": "Normal", "reason": "Resuming", "message": "Resuming at epoch 2"}
    status = {"progress": "5/5 train", "deliveryBytes": 1000}
    _write_report(h, "launcher", report.document(0, status, [event]))
    wait_for(lambda: "Resuming" in h.event_reasons(), what="the event dglrun asked for")
    # the report again, with more progress: the event is not recorded twice
    more = {**status, "progress": "5/5 train: epoch 1/8"}
    _write_report(h, "launcher", report.document(0, more, [event]))
    wait_for(lambda: h.status().get("progress") == "5/5 train: epoch 1/8", what="the progress")
    h.settle()
    assert [e["reason"] for e in h.events()].count("Resuming") == 1
    # a restart: the status forgets the attempt's report, and the old launcher's stays out
    h.finish_pod(W0, exit_code=1)
    wait_for(lambda: h.status().get("restartCount") == 1, what="restartCount 1")
    poke(h)
    h.settle()
    assert "deliveryBytes" not in h.status() and h.status().get("progress") != "5/5 train"
    # the twin: the new attempt's report is taken
    _write_report(h, "launcher", report.document(1, {"progress": "3/5 dispatch"}, []))
    wait_for(lambda: h.status().get("progress") == "3/5 dispatch", what="attempt 1's report")


def test_a_report_the_job_does_not_own_is_ignored(h: Harness) -> None:
    """A ConfigMap of the report's name that is not the job's (made before it, by someone
    else): the operator neither reads it nor takes it over."""
    data = {"launcher": report.document(0, {"progress": "done"}, [])}
    meta = {"name": f"{J}-report", "namespace": NS}
    h.kube.create(CONFIGMAPS, NS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                   "data": data})  # fmt: skip
    h.create_job(seed())
    h.settle()
    assert "progress" not in h.status()
