"""bench/demo_large.py's account of a run: the timeline's bars per pod and attempt, where the
time went, the figures' tables and the HTML report (pure functions over a recorded run; the run
itself is ``make demo-large``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.support import scripts
from tests.support.paths import REPO

dl = scripts.load(REPO / "bench" / "demo_large.py")

MiB = 1 << 20


def recorded() -> Any:
    """A run as the observer records it: two attempts, the node of worker-2 lost after epoch 1
    of 3 (events in the order they were seen, not always in time order)."""
    run = dl.Run("big", started=0.0)
    seen = [
        (0, "job", "applied"),
        (1, "big-worker-0/aaaa", "on n1"),
        (1, "big-worker-2/bbbb", "on n3"),
        (2, "big-worker-0/aaaa", "generate running"),
        (2, "big-worker-2/bbbb", "generate running"),
        (40, "big-worker-0/aaaa", "generate terminated (Completed, exit 0)"),
        (41, "big-worker-2/bbbb", "generate terminated (Completed, exit 0)"),
        (42, "big-worker-0/aaaa", "dgl-graphsage running"),
        (42, "big-worker-2/bbbb", "dgl-graphsage running"),
        (50, "job", "progress 1/5 partition"),
        (45, "big-launcher/cccc", "dgl-graphsage running"),  # seen late, happened earlier
        (200, "job", "progress 4/5 configure"),
        (210, "job", "progress 5/5 train: epoch 0/3"),
        (300, "job", "progress 5/5 train: epoch 1/3"),
        (310, "node/n3", "powered off after epoch 1 (worker 2)"),
        (335, "job", "phase Restarting"),
        (336, "job", "restartCount 1"),
        (340, "node/n3", "powered on again: Ready"),
        (345, "big-worker-2/dddd", "on n3"),
        (346, "big-worker-2/dddd", "generate running"),
        (380, "big-worker-2/dddd", "generate terminated (Completed, exit 0)"),
        (381, "big-worker-2/dddd", "dgl-graphsage running"),
        (390, "job", "progress 1/5 partition"),
        (400, "job", "progress 5/5 train: epoch 2/3"),
        (470, "job", "progress 5/5 train: epoch 3/3"),
        (480, "job", "progress done"),
        (481, "big-worker-2/dddd", "dgl-graphsage terminated (Completed, exit 0)"),
        (482, "job", "phase Completed"),
    ]
    for t, who, what in seen:
        run.events.append(dl.Event(float(t), who, what))
        if what.startswith("on "):
            run.pod_node[who] = what[3:]
    run.last_seen = {"big-worker-0/aaaa": 330.0, "big-worker-2/bbbb": 320.0}
    run.lost = "n3"
    run.memory = {
        "big-worker-0/aaaa": [(50.0, 900 * MiB), (100.0, 2500 * MiB), (250.0, 1800 * MiB)],
        "big-worker-2/dddd": [(390.0, 1000 * MiB), (450.0, 1900 * MiB)],
    }
    run.plan = {
        "partition": {"estimateMiB": 2600, "peakMiB": 2480, "limitMiB": 6912},
        "train": {"estimateMiB": 2100, "peakMiB": 1950, "limitMiB": 6912},
    }
    run.status = {
        "phase": "Completed",
        "restartCount": 1,
        "partitions": {"reused": True},
        "resume": {"checkpoint": "checkpoints/epoch-2.pt"},
    }
    return run


def bars_of(run: Any, row_prefix: str) -> list[tuple[str, float, float]]:
    return [(w, t0, t1) for r, w, t0, t1 in dl.phase_bars(run) if r.startswith(row_prefix)]


def test_each_pod_attempt_gets_its_own_row_with_the_steps_it_lived_through() -> None:
    run = recorded()
    rows = list(dict.fromkeys(r for r, *_ in dl.phase_bars(run)))
    assert rows[:4] == [
        "worker-0 #1 (n1)",
        "worker-2 #1 (n3)",
        "launcher #1 (?)",
        "worker-2 #2 (n3)",
    ]
    # the first worker-2 was listed last at 320 s: its bars end there
    assert bars_of(run, "worker-2 #1") == [
        ("generate", 2.0, 41.0),
        ("1/5 partition", 50.0, 200.0),
        ("4/5 configure", 200.0, 210.0),
        ("train epoch 1/3", 210.0, 300.0),
        ("train epoch 2/3", 300.0, 320.0),
    ]
    # the second attempt partitions nothing (reused) and trains the last epoch only
    assert bars_of(run, "worker-2 #2") == [
        ("generate", 346.0, 380.0),
        ("starting", 381.0, 390.0),
        ("1/5 partition", 390.0, 400.0),
        ("train epoch 3/3", 400.0, 470.0),
        ("evaluate", 470.0, 480.0),
        ("done", 480.0, 481.0),
    ]
    assert bars_of(run, "node n3") == [("powered off", 310.0, 340.0)]
    job = bars_of(run, "job")
    assert ("new attempt (Restarting)", 335.0, 390.0) in job  # the wait between the attempts


def test_where_the_time_went_adds_up_to_the_run() -> None:
    run = recorded()
    # the bridges of 3 nodes: 1 MiB a second on node 1 from 100 s on
    run.traffic = [(float(t), [max(0, t - 100) * MiB, 0, 0]) for t in range(0, 483)]
    took = dl.where_time_went(run)
    seconds = {k: v[0] for k, v in took.items()}
    assert seconds["until the first step (pods made, chunks generated, ranks started)"] == 50
    assert seconds["1/5 partition"] == 150 + 10
    assert seconds["train (every epoch)"] == 90 + 35 + 70
    assert seconds["evaluate"] == 10
    assert seconds["new attempt (Restarting)"] == 55
    assert sum(seconds.values()) == 482
    assert took["1/5 partition"][1] == (200 - 100 + 400 - 390) * MiB
    assert took["until the first step (pods made, chunks generated, ranks started)"][1] == 0


@pytest.mark.parametrize(
    ("progress", "label"),
    [
        ("5/5 train", "train epoch 1"),
        ("5/5 train: epoch 0/4", "train epoch 1/4"),
        ("5/5 train: epoch 3/4", "train epoch 4/4"),
        ("5/5 train: epoch 4/4", "evaluate"),
        ("3/5 dispatch: 10/20 MB", "3/5 dispatch"),
        ("done", "done"),
    ],
)
def test_a_step_is_named_from_dglruns_progress(progress: str, label: str) -> None:
    assert dl.step_label(progress) == label


def test_the_printed_timeline_lists_every_bar_in_time_order() -> None:
    run = recorded()
    lines = dl.timeline_text(run).splitlines()[1:]
    assert len(lines) == len(dl.phase_bars(run))
    starts = [float(line.split()[0]) for line in lines]
    assert starts == sorted(starts)
    outage = next(line for line in lines if "powered off" in line)
    assert outage.split()[:3] == ["310.0", "340.0", "30.0s"] and "node n3" in outage


def test_the_report_draws_every_bar_and_every_pods_memory(tmp_path: Path) -> None:
    run = recorded()
    timeline = ET.fromstring(dl.timeline_svg(run))
    rects = [e for e in timeline.iter("rect")]
    assert len(rects) == len(dl.phase_bars(run))
    assert all(float(r.get("width", "0")) > 0 for r in rects)
    memory = ET.fromstring(dl.memory_svg(run, {"plan: partition": 2600.0}, 6912.0))
    assert len(list(memory.iter("polyline"))) == 2
    labels = "".join(t.text or "" for t in memory.iter("text"))
    assert "plan: partition 2600 MiB" in labels and "limit 6912 MiB" in labels
    log = "\n".join(
        [
            "[partition] [distpart] memory read: peak 10 / 11 / 12 MiB, after 5 / 5 / 5 MiB "
            "(ranks 0..2); sent 1 / 2 / 3 MiB to the other ranks",
            "[partition] [distpart] memory parmetis: peak 90 / 91 / 92 MiB, after 5 / 5 / 5 MiB "
            "(ranks 0..2); sent 0 / 0 / 0 MiB to the other ranks",
            "[partition] [distpart] memory shuffle: peak 40 / 41 / 42 MiB, after 5 / 5 / 5 MiB "
            "(ranks 0..2); sent 7 / 7 / 7 MiB to the other ranks",
            "[partition] [distpart] memory shuffle: peak 50 / 30 / 42 MiB, after 5 / 5 / 5 MiB "
            "(ranks 0..2); sent 1 / 1 / 1 MiB to the other ranks",
            "  edge cut 125 (12.50% of 1000 edges); nodes per part [33, 33, 34]; peak memory",
            "  ranks' steps: read 1.5s, parmetis 20.0s, shuffle 3.0s, total 30.0s",
        ]
    )
    figures = dl.tables(run, log, None, dl.where_time_went(run))
    assert "edge cut 12.50% of 1,000 edges" in figures
    assert "| parmetis | 20.0 | 90 / 91 / 92 | 0 / 0 / 0 |" in figures
    assert "| read | 1.5 | 10 / 11 / 12 | 1 / 2 / 3 |" in figures
    assert "| shuffle | 3.0 | 50 / 41 / 42 | 8 / 8 / 8 |" in figures  # two rounds
    assert "| total | 30.0 | | |" in figures
    assert "| partition | 2600 | 2480 | 6912 |" in figures
    del run.plan["partition"]["peakMiB"]  # an attempt that partitioned, then was lost
    again = dl.tables(run, log, None, dl.where_time_went(run))
    assert "| partition | 2600 | 92 (the largest rank's, from its log) | 6912 |" in again
    assert "| big-worker-0/aaaa | n1 | 2500 |" in figures
    out = tmp_path / "r.html"
    dl.write_report(out, [run], figures, ["big: Completed"])
    page = out.read_text()
    assert page.count("<svg") == 2 and "<li>big: Completed</li>" in page
    assert "powered off after epoch 1 (worker 2)" in page


@pytest.mark.parametrize(
    ("progress", "epochs"),
    [("5/5 train: epoch 2/4", 2), ("1/5 partition", 0), ("", 0), ("done", 0)],
)
def test_epochs_done_reads_the_progress(progress: str, epochs: int) -> None:
    assert dl.epochs_done({"progress": progress}) == epochs


def test_the_manifest_is_sized_to_the_nodes_and_the_scale() -> None:
    job = dl.job_manifest("x", 0.25, 5, 7 * 1024 * MiB)
    spec = job["spec"]["dglReplicaSpecs"]
    args = spec["Launcher"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--num-epochs") + 1] == "5"
    worker = spec["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["memory"] == "7168Mi"
    assert worker["containers"][0]["resources"]["requests"]["memory"] == "6656Mi"
    assert "--nodes 612257 --edges 15464785" in worker["initContainers"][0]["args"][0]
    assert job["spec"]["partitionMode"] == "DistParMETIS"
    assert job["spec"]["chunkedGraph"]["layout"] == "PerWorker"
    full = dl.job_manifest("y", 1.0, 4, 7 * 1024 * MiB)
    assert (
        "--nodes"
        not in full["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["initContainers"][0][
            "args"
        ][0]
    )


def test_the_kueue_summary_names_the_workloads_evictions_and_pods_ready_in_order() -> None:
    """--kueue: the Workload conditions the observer saw, in the order it saw them."""
    run = dl.Run("big", started=0.0)
    run.workloads = {"dgljob-big-1a2b3-4c5d6": {"PodsReady": "True Recovered"}}
    for t, what in [
        (10, "Admitted True Admitted"),
        (90, "PodsReady True Started"),
        (300, "PodsReady False WaitForRecovery"),
        (330, "PodsReady True Recovered"),
        (400, "PodsReady False WaitForRecovery"),
        (420, "PodsReady True Recovered"),
    ]:
        run.events.append(dl.Event(float(t), "workload/dgljob-big-1a2b3-4c5d6", what))
    run.events.append(dl.Event(301.0, "job", "rescale decided: NodeLost, from 3 workers"))
    assert dl.kueue_summary(run) == (
        "big under Kueue: Workloads dgljob-big-1a2b3-4c5d6; evictions 0; PodsReady True Started "
        "-> False WaitForRecovery -> True Recovered -> False WaitForRecovery -> True Recovered"
    )


def test_epochs_done_and_trains_read_the_typed_detail_first() -> None:
    """This dglrun's status: the detail's epochs, whatever the text says; done is not
    training; a bad detail counts nothing."""
    from podcontract.progress import ProgressDetail

    d = ProgressDetail(step=5, steps=5, step_name="train", percentage=80, epochs_done=3, epochs=4)
    status = {"progress": "5/5 train: epoch 1/4", "progressDetail": d.as_status()}
    assert dl.epochs_done(status) == 3 and dl.trains(status)
    over = {"progress": "5/5 train", "progressDetail": dict(d.as_status(), percentage=100)}
    assert dl.epochs_done(over) == 3 and not dl.trains(over)
    bad = {"progress": "5/5 train: epoch 2/4", "progressDetail": dict(d.as_status(), epochs=2)}
    assert dl.epochs_done(bad) == 0 and not dl.trains(bad)
    assert dl.trains({"progress": "5/5 train: epoch 2/4"}), "an older dglrun's text"
    assert not dl.trains({"progress": "4/5 configure"})
