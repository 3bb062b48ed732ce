"""The values of status.progressDetail (launcher/report/eta.py, launcher/plans/time.py,
podcontract/progress.py) from phases and lines, on a clock the test moves."""

from __future__ import annotations

import pytest

from chunkedgraph.job import KAMINPAR, PTSCOTCH
from launcher.plans import time as timeplan
from launcher.plans.memory import GraphSize, Processes, Shape
from launcher.report.eta import Eta
from podcontract import DGL_API, DIST_PARMETIS, PARMETIS
from podcontract.progress import (
    FROM_DETAIL,
    FROM_OLD_DETAIL,
    FROM_TEXT,
    ProgressDetail,
    ProgressReading,
    human,
    read,
)

ONE_EACH = Processes(servers=1, trainers=1)  # DGL server and trainer per worker


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_train_eta_comes_from_the_epochs_measured() -> None:
    clock = Clock()
    eta = Eta(10, clock)
    eta.step(5, 5, "train")
    clock.t += 40  # servers up, the first epoch
    assert eta.detail().step_remaining is None, "no epoch yet: no estimate"
    eta.epoch(1, "w0/trainer-0", "epoch 0 loss 2.0 nodes 1000 time 12.00s")
    d = eta.detail()
    assert d.step_remaining == 9 * 12 and d.remaining == d.step_remaining, "its own time"
    clock.t += 10
    eta.epoch(2, "w0/trainer-0", "epoch 1 loss 1.5 nodes 1000 time 9.00s")
    clock.t += 4  # 4 s into the third epoch
    d = eta.detail()
    assert d.step_remaining == 8 * 10 - 4, "the wall time between epoch lines, less the current"
    assert d.percentage == 80 + 2 * 20 // 10
    assert d.metrics["epoch"] == 2 and d.metrics["loss"] == 1.5
    assert d.metrics["samplesPerSecond"] == round(1000 / 9, 1)


def test_a_resumed_job_counts_from_its_first_epoch_line() -> None:
    clock = Clock()
    eta = Eta(10, clock)
    eta.step(5, 5, "train")
    clock.t += 30
    eta.epoch(7, "w0/trainer-0", "epoch 6 loss 1 nodes 10 time 5.00s")  # resumed at 6
    assert eta.detail().step_remaining == 3 * 5
    clock.t += 6
    eta.epoch(8, "w0/trainer-0", "epoch 7 loss 1 nodes 10 time 5.00s")
    assert eta.detail().step_remaining == 2 * 6


def test_metrics_from_every_trainer_and_the_example_line() -> None:
    eta = Eta(3, Clock())
    eta.step(5, 5, "train")
    line = (
        "epoch 2 loss 0.5000 (all trainers 0.4500) nodes 800 time 2.00s val_acc 0.81 test_acc 0.8"
    )
    eta.epoch(3, "w0/trainer-0", line)
    eta.epoch(3, "w1/trainer-0", "epoch 2 loss 0.4 nodes 600 time 2.00s")
    m = eta.detail().metrics
    assert m["loss"] == 0.4, "the latest line's"
    assert (m["valAccuracy"], m["testAccuracy"]) == (0.81, 0.8)
    assert m["samplesPerSecond"] == 400 + 300, "summed over the trainers"
    other = Eta(3, Clock())
    other.step(5, 5, "train")
    other.epoch(1, "train", "Epoch 00000 | Step 00019 | Loss 1.2 | Speed (samples/sec) 1523.5")
    assert other.detail().metrics["samplesPerSecond"] == 1523.5


def test_partition_eta_is_the_model_then_the_pace() -> None:
    clock = Clock()
    eta = Eta(1, clock)
    products = GraphSize(2_449_029, 123_718_280, 400)
    eta.expect(timeplan.Estimate(100.0, KAMINPAR, 3, products))
    eta.step(1, 5, "partition")
    clock.t += 4  # mpirun, the chunks checked
    assert eta.detail().step_remaining == 96 and eta.detail().remaining is None
    assert not eta.partition_line("[distpart] 2449029 nodes, 123718280 edges from m.json ...")
    clock.t += 10
    (_, seconds), *_ = reversed(timeplan.STEP_SECONDS[KAMINPAR])  # products' size: its shares
    done = seconds["read"] + seconds["adjacency"] + seconds["parmetis"]  # > TRUST_PACE
    for name in ("read", "adjacency", "parmetis"):
        assert eta.partition_line(f"[distpart] memory {name}: peak 10 / 10 MiB")
    assert not eta.partition_line("[distpart] memory read: peak 10 / 10 MiB"), "seen"
    # the pace: 10 s of distpart for 45% of its run (a faster machine than the model's), after
    # 4 s before it
    paced = 4 + 10 / (done / sum(seconds.values()))
    before = eta.detail()
    assert before.step_remaining == round(paced - 14) and before.percentage == 10
    clock.t += paced  # past every estimate: none rather than a wrong one
    d = eta.detail()
    assert d.step_remaining is None and d.percentage == 10, "the share shown never goes back"


def test_the_steps_shares_are_the_nearest_sizes() -> None:
    small = timeplan.share_done(KAMINPAR, 20_000_000, {"read", "adjacency", "parmetis"})
    large = timeplan.share_done(KAMINPAR, 100_000_000, {"read", "adjacency", "parmetis"})
    assert small == pytest.approx(9.0 / 14.5) and large == pytest.approx(25.0 / 55.1)
    every = {"read", "adjacency", "parmetis", "renumber", "shuffle", "write"}
    assert timeplan.share_done(PTSCOTCH, 1, every) == timeplan.MAX_SHARE, "other counts left"


def test_dispatch_eta_from_the_bytes_rate() -> None:
    clock = Clock()
    eta = Eta(1, clock)
    eta.step(3, 5, "dispatch")
    eta.pulled(100, 1000)
    assert eta.detail().step_remaining is None, "one reading: no rate yet"
    clock.t += 3
    eta.pulled(400, 1000)  # 100 B/s
    d = eta.detail()
    assert d.step_remaining == 6 and d.percentage == int(100 * (2 + 0.4) / 5)


def test_finished_details() -> None:
    eta = Eta(1, Clock())
    eta.step(4, 5, "configure")
    assert eta.detail().step_remaining is None and eta.detail().percentage == 60
    done = eta.finished(True)
    assert (done.percentage, done.remaining, done.eta) == (100, 0, "")
    failed = eta.finished(False)
    assert (failed.percentage, failed.remaining, failed.eta) == (60, None, "")


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59.6, "1m00s"), (250, "4m10s"), (7500, "2h05m")]
)
def test_human(seconds: float, text: str) -> None:
    assert human(seconds) == text


def test_detail_round_trip_and_untrusted_fields() -> None:
    d = ProgressDetail(5, 5, "train", 90, 30, 30, {"loss": 0.4, "epoch": 3.0})
    assert ProgressDetail.parse({"progressDetail": d.as_status()}) == d
    assert d.eta == "30s"
    step_only = ProgressDetail(1, 5, "partition", 4, 500, None)
    assert step_only.eta == "partition ~8m20s"
    odd = ProgressDetail.parse(
        {"progressDetail": {"step": "x", "percentage": 50.7, "metrics": {"a": "b", "c": 1}}}
    )
    assert odd == ProgressDetail(percentage=50, metrics={"c": 1.0})
    assert ProgressDetail.parse({}) is None and ProgressDetail.parse(None) is None
    typed = ProgressDetail(5, 5, "train", 90, 30, 30, {"loss": 0.4}, epochs_done=3, epochs=8)
    assert ProgressDetail.parse({"progressDetail": typed.as_status()}) == typed


def test_read_takes_this_dglruns_detail_and_never_its_text() -> None:
    d = ProgressDetail(3, 5, "dispatch", 45, None, None, epochs=8)
    for text in ("", "1/5 partition", "5/5 train: epoch 7/8", "done", "failed in 2/5 deliver"):
        r = read({"progress": text, "progressDetail": d.as_status()})
        assert (r.detail, r.source, r.text, r.problem) == (d, FROM_DETAIL, text, "")
    assert read({}) == read(None) == ProgressReading()


@pytest.mark.parametrize(
    ("text", "step", "name", "done", "epochs"),
    [
        ("1/5 partition", 1, "partition", 0, 0),
        ("3/5 dispatch: 210/420 MB", 3, "dispatch", 0, 0),
        ("5/5 train: epoch 3/10", 5, "train", 3, 10),
        ("failed in 5/5 train", 5, "train", 0, 0),
        ("done", 0, "", 0, 0),
    ],
)
def test_an_older_dglruns_text_is_read_by_the_one_fallback(
    text: str, step: int, name: str, done: int, epochs: int
) -> None:
    r = read({"progress": text})
    assert r.source == FROM_TEXT and r.detail is not None and r.problem == ""
    d = r.detail
    assert (d.step, d.step_name, d.epochs_done, d.epochs) == (step, name, done, epochs)
    assert (d.percentage, d.remaining) == ((100, 0) if text == "done" else (0, None))
    assert read({"progress": "warming up"}) == ProgressReading(None, "warming up")


def test_an_older_dglruns_detail_has_its_epochs_from_the_text() -> None:
    old = {"step": 5, "steps": 5, "stepName": "train", "percentage": 90, "eta": "30s",
           "estimatedRemainingSeconds": 30}  # fmt: skip
    r = read({"progress": "5/5 train: epoch 3/10", "progressDetail": old})
    assert r.source == FROM_OLD_DETAIL and r.detail is not None
    assert (r.detail.step, r.detail.percentage, r.detail.remaining) == (5, 90, 30)
    assert (r.detail.epochs_done, r.detail.epochs) == (3, 10)


@pytest.mark.parametrize(
    "junk",
    [[], "x", 3, {"epochs": {}}, {"epochs": [1]}, {"epochs": float("nan")},
     {"epochs": float("inf")}, {"epochs": 2.5}, {"epochsDone": None, "epochs": 1},
     {"epochs": 1, "step": None}, {"epochs": 1, "percentage": "90%"},
     {"epochs": 1, "stepRemainingSeconds": -1}, {"epochs": 1, "metrics": [1]}],
)  # fmt: skip
def test_any_bad_detail_is_a_problem_never_an_exception(junk: object) -> None:
    base = ProgressDetail(5, 5, "train", 90, epochs_done=1, epochs=2).as_status()
    raw = dict(base, **junk) if isinstance(junk, dict) else junk
    r = read({"progress": "5/5 train: epoch 1/2", "progressDetail": raw})
    assert r.detail is None and r.source == "" and r.problem.endswith(": ignored"), r
    assert r.problem.startswith("status.progressDetail") and len(r.problem) < 200


def test_the_time_model_fits_its_measurements() -> None:
    for key, points in timeplan.MEASURED.items():
        fit = timeplan.FITS[key]
        for edges, seconds in points:
            assert fit.seconds(edges) == pytest.approx(seconds, rel=0.5), (key, edges)
    products = GraphSize(2_449_029, 123_718_280, 400)
    shape = Shape(PARMETIS, workers=3, parts=3, ranks=3, processes=ONE_EACH)
    est = timeplan.estimate(products, shape)
    assert (est.partitioner, est.ranks) == (KAMINPAR, 3)
    assert "partition: ~" in est.line() and "123,718,280 edges on 3 ranks" in est.line()
    slow = timeplan.estimate(
        products, Shape(DIST_PARMETIS, 8, 8, 8, ONE_EACH, partitioner=PTSCOTCH)
    )
    assert (slow.partitioner, slow.ranks) == (PTSCOTCH, 3), "the nearest rank count measured"
    assert slow.seconds > est.seconds
    one = timeplan.estimate(GraphSize(10_000, 100_000, 100), Shape(DGL_API, 2, 2, 1, ONE_EACH))
    assert one.seconds == timeplan.FLOOR_SECONDS and "one process" in one.line()


def test_one_epoch_line_lies_between_its_own_time_and_the_trainers_first_output() -> None:
    """The example evaluates after each epoch, before it prints the epoch's line: the epoch's
    own time leaves that out; the wall time since the trainers came up has their setup."""
    clock = Clock()
    eta = Eta(5, clock)
    eta.step(5, 5, "train")
    clock.t += 30  # the DGL servers load their partitions
    eta.trainer_line()  # "... up in 3.1s"
    clock.t += 36  # 9 s of setup, 16 s of training, 11 s of evaluation
    eta.epoch(1, "w0/trainer-0", "epoch 0 loss 1 nodes 100 time 16.00s val_acc 0.5 test_acc 0.5")
    assert eta.detail().step_remaining == 4 * 24, "between 16 s (the epoch) and 36 s"
