"""``dglctl report``'s readings and page from objects and logs as the API server and the claim
give them (tests.support.reports: a job of two attempts, a pod of it gone and known only by its
Events, dglrun's stamped log lines)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dgl_operator.client.report import ours
from dgl_operator.report.page import page, svg_memory, svg_timeline
from dgl_operator.report.readings import (
    DglrunLog,
    LogLine,
    memory,
    read,
    replica,
    stamped_lines,
    step_windows,
)
from tests.support.reports import T0, at, event, launcher_log, log, readings


def test_a_phase_is_cut_into_its_epochs_and_the_last_ones_evaluation() -> None:
    windows = step_windows(launcher_log(2, 65, 2, 4))
    names = [w[0] for w in windows]
    assert names == [
        "1/5 partition", "2/5 deliver", "train epoch 3", "train epoch 4", "evaluate"
    ]  # fmt: skip
    ep4 = windows[3]
    assert ep4[2] - ep4[1] == 8.0  # its own time; the rest of it was the evaluation
    assert windows[4][2] == T0 + 65 + 7 + 20 + 3  # to "[5/5] train done"


def test_an_attempt_cut_short_ends_its_phase_at_its_last_line() -> None:
    windows = step_windows(launcher_log(1, 20, 0, 2))
    assert [w[0] for w in windows][-3:] == ["train epoch 1", "train epoch 2", "train epoch 3"]
    assert windows[-1][2] - windows[-1][1] == 5.0  # from the second epoch's line to the last


def test_every_pod_and_attempt_is_a_row_and_a_gone_pod_comes_from_its_events() -> None:
    r = readings()
    rows = list(dict.fromkeys(b.row for b in r.bars))
    assert rows[:2] == ["job, attempt 1", "job, attempt 2"]  # (then "job": it was queued)
    assert "worker-1 #1 (node-2)" in rows  # gone: Scheduled, Started, Killing
    assert {"worker-0 #2 (node-1)", "worker-1 #2 (node-2)", "launcher #2 (node-1)"} <= set(rows)
    pairs = [(b.row, b.what) for b in r.bars]
    assert len(pairs) == len(set(pairs)), pairs  # one bar per pod and step
    w1a = {b.what for b in r.bars if b.row == "worker-1 #1 (node-2)"}
    assert w1a == {"1/5 partition", "2/5 deliver", "train epoch 1", "train epoch 2",
                   "train epoch 3"}  # fmt: skip
    w1b = [b for b in r.bars if b.row == "worker-1 #2 (node-2)"]
    assert [b.what for b in w1b] == [
        "1/5 partition", "2/5 deliver", "train epoch 3", "train epoch 4", "evaluate"
    ]  # fmt: skip
    assert all(b.end > b.start >= 0 for b in r.bars)
    assert ("job", "queued") in pairs  # created at 0, its first pod at 12 s
    assert [m.what.split(":")[0] for m in r.marks] == ["DGLJobRestarting"]


def test_memory_is_one_line_per_pod_and_attempt_from_the_samples() -> None:
    r = readings()
    by_pod = {s.pod: s.samples for s in r.memory}
    assert set(by_pod) == {"launcher #1", "launcher #2", "worker-0 #1", "worker-0 #2",
                           "worker-1 #1", "worker-1 #2"}  # fmt: skip
    assert by_pod["worker-0 #2"] == [(73.0, 820.0)]  # two processes' samples of one pod
    assert by_pod["launcher #2"] == [(66.0, 300.0)]


def test_the_partition_profile_and_the_bytes_moved() -> None:
    r = readings()
    assert r.profile.peak == {"read": [10.0, 11.0]} and r.profile.sent == {"read": [2.0, 4.0]}
    assert r.profile.seconds == {"read": 1.5, "total": 3.0}
    assert r.profile.cut == "12.50% of 1,000 edges"
    assert ("attempt 2: partition 1 pulled by its worker", 4096) in r.moved
    assert ("ranks' read: sent to the other ranks", 6 * (1 << 20)) in r.moved
    assert [(s, a) for s, a, _ in r.steps][:2] == [("1/5 partition", 1), ("2/5 deliver", 1)]


def test_the_page_is_well_formed_svg_and_escapes_what_it_quotes() -> None:
    r = readings()
    html = page(r)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;trained&lt;/b&gt;" in html
    assert r.ended == "Succeeded" and "DGLJob team-a/cut: Completed (Succeeded)</h1>" in html
    timeline = ET.fromstring(svg_timeline(r.bars, r.marks))
    rects = [e for e in timeline.iter("rect") if e.get("class") == "bar"]
    assert len(rects) == len(r.bars)
    assert {(e.get("data-row"), e.get("data-step")) for e in rects} == {
        (b.row, b.what) for b in r.bars
    }
    plot = ET.fromstring(svg_memory(r.memory, {"plan: train": 900.0}, 2048.0))
    assert [p.get("data-pod") for p in plot.iter("polyline")] == sorted(s.pod for s in r.memory)
    assert [line.get("class") for line in plot.iter("line")].count("limit") == 1
    assert r.limit == 2048.0  # (status.memory's; a pod's own limit counts too)
    assert "http-equiv='refresh' content='10'" in page(r, refresh=10)
    assert "refresh" not in html


def test_lines_without_a_time_are_dropped_and_a_stamp_reads_back() -> None:
    lines = stamped_lines([f"{at(1.25)} [1/5] partition", "no time here", "2026-13-99T00 x"])
    assert lines == [LogLine(T0 + 1.25, "[1/5] partition")]
    assert memory([DglrunLog("launcher", lines, 1)], T0) == []


def test_a_trainer_that_prints_no_epoch_time_still_has_its_epochs() -> None:
    lines = [
        (0.0, "[5/5] train"),
        (10, "[w-0/trainer-0] epoch 0 loss 0.9"),
        (19, "[w-0/trainer-0] epoch 1 loss 0.7"),
        (25, "[5/5] train done in 25.0s"),
    ]
    windows = [(w, t1 - t0) for w, t0, t1 in step_windows(log("launcher", 1, lines))]
    assert windows == [("train epoch 1", 10.0), ("train epoch 2", 9.0), ("evaluate", 6.0)]


def test_only_this_jobs_events_count() -> None:
    job = {"metadata": {"name": "cut", "uid": "u1", "creationTimestamp": at(0)}}
    mine = event("DGLJob", "cut", "u1", "DGLJobCreated", 1)
    assert ours(job, mine) and ours(job, event("Pod", "cut-worker-12", "p", "Started", 3))
    assert ours(job, event("Pod", "cut-launcher", "p", "Started", 3))
    assert not ours(job, event("DGLJob", "cut", "u0", "DGLJobCreated", 1))  # an earlier "cut"
    assert not ours(job, event("Pod", "cut-worker-0", "p", "Killing", -60))  # its pods
    assert not ours(job, event("Pod", "cut-2-worker-0", "p", "Started", 3))  # job "cut-2"'s
    assert not ours(job, event("Pod", "cut-results-1a2b", "p", "Started", 3))  # a reader pod
    assert (replica("cut", "cut-partitioner"), replica("cut", "cut-worker-x")) == (
        "partitioner",
        None,
    )


def test_a_job_with_no_pod_no_plan_and_no_log_yet_reads_empty() -> None:
    job = {"metadata": {"name": "new", "namespace": "a", "creationTimestamp": at(0)}}
    r = read(job, [], [], [], now=T0 + 5)
    assert (r.phase, r.ended, r.limit, r.bars, r.memory) == ("Pending", "", 0.0, [], [])
    assert "DGLJob a/new: Pending</h1>" in page(r)


def test_the_metrics_come_from_the_typed_detail_and_a_bad_one_is_a_note() -> None:
    """The report's metrics are the detail's; a detail with a field of the wrong type is left
    out, and the page says why (a note), instead of failing."""
    r = readings()
    assert r.metrics == {"testAccuracy": 0.79} and r.notes == []
    job = {"metadata": {"name": "odd", "namespace": "a", "creationTimestamp": at(0)},
           "status": {"progress": "done", "progressDetail": {
               "step": 5, "steps": 5, "epochsDone": "all", "epochs": 3, "percentage": 100,
               "metrics": {"testAccuracy": 0.8}}}}  # fmt: skip
    bad = read(job, [], [], [], now=T0 + 5)
    assert bad.metrics == {} and bad.progress == "done"
    assert bad.notes == ["status.progressDetail.epochsDone is 'all', not a whole number: ignored"]
    assert "<p class='note'>status.progressDetail.epochsDone is &#x27;all&#x27;" in page(bad)
