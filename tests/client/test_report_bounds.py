"""``dglctl report`` against crafted logs (issue 57): a line it cannot read is skipped, never a
crash, and what it reads is bounded (the pod's log asked with ``limitBytes``, the Events with a
``limit``). Each crafted line has a well-formed twin that is read: a reader skipping everything
fails these tests."""

from __future__ import annotations

from typing import Any

import pytest

from dgl_operator.client import report as report_mod
from dgl_operator.report.readings import (
    MAX_LINE,
    memory,
    moved,
    profile,
    read,
    stamped_lines,
    step_seconds,
    step_windows,
)
from kubeclient import EVENTS, PODS
from tests.fakekube import FakeKube
from tests.support.reports import T0, at, log

BIG = "1" * 5000  # (int() of more than 4300 digits is a ValueError)
DISTPART = (
    "[partition] [distpart] memory read: peak {} MiB, after 5 / 5 MiB (ranks 0..1); "
    "sent 1 / 2 MiB to the other ranks"
)


def test_peak_slash_slash_is_skipped_and_its_twin_read() -> None:
    crafted = log("launcher", 1, [(1, DISTPART.format("/ /"))])
    assert profile([crafted]).peak == {}
    twin = log("launcher", 1, [(1, DISTPART.format("10 / 11"))])
    assert profile([twin]).peak == {"read": [10.0, 11.0]}


def test_a_5000_digit_edge_count_is_skipped_and_its_twin_read() -> None:
    crafted = log("launcher", 1, [(1, f"  edge cut 125 (12.50% of {BIG} edges)")])
    assert profile([crafted]).cut == ""
    twin = log("launcher", 1, [(1, "  edge cut 125 (12.50% of 1000 edges)")])
    assert profile([twin]).cut == "12.50% of 1,000 edges"


def test_a_10mb_line_is_skipped_and_its_neighbours_read() -> None:
    lines = [f"{at(1)} [1/5] partition", f"{at(2)} " + "x" * (10 * 1024 * 1024), f"{at(3)} ok"]
    got = stamped_lines(lines)
    assert [ln.text for ln in got] == ["[1/5] partition", "ok"]
    assert len(stamped_lines([f"{at(2)} " + "x" * (MAX_LINE - 40)])) == 1


PULL = "[worker-1/pull] pull: part {}: {}/4096 bytes"
SAMPLE = "[worker-0/trainer-0] memory sample: {} MiB"


@pytest.mark.parametrize(
    "crafted, twin",
    [
        (PULL.format(BIG, 4096), PULL.format(1, 4096)),
        (PULL.format(1, BIG), PULL.format(1, 4096)),
        (SAMPLE.format(BIG), SAMPLE.format(5)),
        (f"  ranks' steps: read {BIG}s", "  ranks' steps: read 1.5s"),
        ("[1/5] partition done in 1.2.3s", "[1/5] partition done in 1.5s"),
        (f"[1/5] partition done in {BIG}s", "[1/5] partition done in 1.5s"),
    ],
)  # fmt: skip
def test_a_figure_it_cannot_read_skips_its_line(crafted: str, twin: str) -> None:
    def readings(text: str) -> tuple[object, ...]:
        g = log("launcher", 1, [(0, "[1/5] partition"), (1, text)])
        prof = profile([g])
        return moved([g], prof), memory([g], T0), prof.seconds, step_seconds(g)

    empty: tuple[object, ...] = ([], [], {}, [])
    assert readings(crafted) == empty
    assert readings(twin) != empty


def test_an_epoch_it_cannot_read_is_skipped() -> None:
    def epochs(text: str) -> list[str]:
        g = log("launcher", 1, [(0, "[5/5] train"), (5, text), (9, "[5/5] train done in 9s")])
        return [w for w, _, _ in step_windows(g)]

    assert epochs(f"[worker-0/trainer-0] epoch {BIG} loss 1 time 1.0s") == ["5/5 train"]
    assert epochs("[worker-0/trainer-0] epoch 0 loss 1 time 1.2.3s") == ["5/5 train"]
    assert epochs("[worker-0/trainer-0] epoch 0 loss 1 time 1.0s") == [
        "train epoch 1",
        "evaluate",
    ]


def test_a_report_of_crafted_lines_reads_the_others() -> None:
    job = {"metadata": {"name": "cut", "creationTimestamp": at(0)}, "status": {}}
    lines: list[tuple[float, str]] = [
        (1, "[1/5] partition"),
        (2, DISTPART.format("/ /")),
        (3, f"  edge cut 125 (12.50% of {BIG} edges)"),
        (4, f"[worker-1/pull] pull: part {BIG}: 1/1 bytes"),
        (5, "[1/5] partition done in 4.0s"),
    ]
    r = read(job, [], [], [log("launcher", 1, lines)], T0 + 10)
    assert r.steps == [("1/5 partition", 1, 4.0)] and r.profile.cut == "" and r.moved == []


# -- what it reads, bounded ---------------------------------------------------------------------


def cluster(events: int) -> tuple[FakeKube, dict[str, Any]]:
    kube = FakeKube()
    job = {"metadata": {"name": "cut", "namespace": "ns", "uid": "u1", "creationTimestamp": at(0)}}
    kube.create(PODS, "ns", {
        "metadata": {"name": "cut-launcher", "labels": {"dgl.qihoo.net/job-name": "cut"}},
        "spec": {"containers": [{"name": "main"}]},
        "status": {"containerStatuses": [{"name": "main", "state": {"running": {}}}]},
    })  # fmt: skip
    for i in range(events):
        kube.create(EVENTS, "ns", {
            "metadata": {"name": f"e{i}"}, "reason": "DGLJobAdmitted", "lastTimestamp": at(i),
            "involvedObject": {"kind": "DGLJob", "name": "cut", "uid": "u1"},
        })  # fmt: skip
    return kube, job


def test_a_log_larger_than_the_bound_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_mod, "LOG_BYTES", 200)
    kube, job = cluster(0)
    first = f"{at(1)} [1/5] partition\n"
    kube.set_log("ns", "cut-launcher", first + f"{at(2)} [launcher] " + "x" * 1000 + "\n")
    options = report_mod.ReportOptions(claim=False)
    r, _ = report_mod.collect(kube, "ns", job, options)  # type: ignore[arg-type]
    assert kube.log_queries[-1]["limitBytes"] == 201  # (asked: at most the bound, and a byte)
    assert [s for s, _, _ in r.steps] == [] and r.bars  # its first line was read
    assert "the log of pod ns/cut-launcher is longer than 200 bytes" in " ".join(r.notes)
    # a log within the bound is read whole, without a note
    kube.set_log("ns", "cut-launcher", first + f"{at(2)} [1/5] partition done in 1.0s\n")
    r, _ = report_mod.collect(kube, "ns", job, options)  # type: ignore[arg-type]
    assert r.steps == [("1/5 partition", 1, 1.0)] and r.notes == []


def test_the_events_are_listed_with_a_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_mod, "EVENTS_LIMIT", 3)
    options = report_mod.ReportOptions(claim=False)
    kube, job = cluster(5)
    r, _ = report_mod.collect(kube, "ns", job, options)  # type: ignore[arg-type]
    assert len(r.events) == 3
    assert r.notes == ["namespace ns has more than 3 Events: not all read"]
    kube, job = cluster(3)
    r, _ = report_mod.collect(kube, "ns", job, options)  # type: ignore[arg-type]
    assert len(r.events) == 3 and r.notes == []


def test_the_fake_api_server_pages_a_list_and_bounds_a_log() -> None:
    kube, _ = cluster(5)
    first = kube.list(EVENTS, "ns", limit=2)
    assert [e["metadata"]["name"] for e in first["items"]] == ["e0", "e1"]
    assert first["metadata"]["remainingItemCount"] == 3
    rest = kube.list(EVENTS, "ns", limit=10, continue_token=first["metadata"]["continue"])
    assert [e["metadata"]["name"] for e in rest["items"]] == ["e2", "e3", "e4"]
    assert "continue" not in rest["metadata"]
    kube.set_log("ns", "cut-launcher", "a\nb\nc\n")
    assert (
        kube.stream(PODS, "ns", "cut-launcher", "log", query={"tailLines": 2}).read() == b"b\nc\n"
    )
    got = kube.stream(PODS, "ns", "cut-launcher", "log", query={"limitBytes": 3}).read()
    assert got == b"a\nb"
