"""An elastic attempt's side in dglrun: the operator's count and batch rule (launcher.options),
the grow request read from the job (launcher.report.progress), the stop at the next whole
checkpoint (launcher.training.rescale) with every DGL process stopped
(launcher.training.train._supervise), and the exit code the operator reads as a rescale
(launcher.report.outcome)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from launcher import options
from launcher.checkpoints import newest_finished, saving
from launcher.console import Console, PhaseError, Report
from launcher.report import outcome
from launcher.report.progress import ReportProgress
from launcher.training.rescale import GrowWatch, RescaleStop, wait_for_count
from launcher.training.train import _supervise
from podcontract import PHASE_LAUNCHER_WORKLOAD, RESCALE_EXIT_CODE
from podcontract.settings import ELASTIC, NUM_PARTITIONS
from tests.launcher.fake_procs import FakeProc, job

ARGS = ["-g", "g", "--train-entry-point", "train.py", "--num-partitions", "2",
        "--batch-size", "1000", "--num-trainers", "2"]  # fmt: skip
SKIP = {"DGL_OPERATOR_PHASE": PHASE_LAUNCHER_WORKLOAD}


def test_the_operator_count_overrides_num_partitions_and_the_batch_is_global() -> None:
    env = {**SKIP, NUM_PARTITIONS.env: "3", ELASTIC.env: ELASTIC.write(True)}
    o = options.parse(ARGS, env)
    assert o.num_partitions == 3
    assert o.global_batch == 1000 and o.training.batch_size == 1000 // (3 * 2)
    rigid = options.parse(ARGS, SKIP)
    assert (
        rigid.num_partitions == 2
        and rigid.training.batch_size == 1000
        and rigid.global_batch is None
    )


def test_a_batch_smaller_than_the_trainers_gives_each_one_node() -> None:
    env = {**SKIP, NUM_PARTITIONS.env: "3", ELASTIC.env: ELASTIC.write(True)}
    o = options.parse([*ARGS[:-4], "--batch-size", "4", "--num-trainers", "2"], env)
    assert o.training.batch_size == 1


def test_a_bad_count_names_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        options.parse(ARGS, {**SKIP, NUM_PARTITIONS.env: "three"})
    assert e.value.code == 2
    assert f"${NUM_PARTITIONS.env}='three': must be a positive integer" in capsys.readouterr().err


def test_grow_to_reads_the_status_field() -> None:
    calls: list[list[str]] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "3" if len(calls) > 1 else "", "")

    p = ReportProgress("/k/kubectl", "job", 1, print, interval=3600, run=run)
    try:
        assert p.grow_to() is None  # (no request: the field is empty)
        assert p.grow_to() == 3
    finally:
        p.finish(None)
    assert calls[0] == ["/k/kubectl", "get", "dgljob", "job", "--subresource=status", "-o",
                        "jsonpath={.status.elastic.growTo}"]  # fmt: skip


def test_grow_to_is_none_when_the_api_refuses() -> None:
    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "Forbidden")

    p = ReportProgress("kubectl", "job", 1, print, interval=3600, run=run)
    try:
        assert p.grow_to() is None
    finally:
        p.finish(None)


def checkpoint(folder: Path, epoch: int) -> None:
    with saving(folder, epoch) as tmp:
        tmp.write_bytes(b"state %d" % epoch)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_stop_waits_for_the_next_whole_checkpoint(tmp_path: Path) -> None:
    checkpoint(tmp_path, 2)
    asked: list[int | None] = [None]
    clock = Clock()
    watch = GrowWatch(lambda: asked[0], tmp_path, interval=3.0, clock=clock)
    assert watch.check() is None  # asked at once: nothing yet
    asked[0] = 3
    clock.now += 1
    assert watch.check() is None and watch.asked is None, "asked again only after interval"
    clock.now += 3
    assert watch.check() is None and watch.asked == 3  # asked: epoch 2 is the baseline
    clock.now += 1
    assert watch.check() is None, "the checkpoint of the epoch under way is not there yet"
    (tmp_path / "epoch-3.pt").write_bytes(b"half")  # renamed into place, no digest yet
    clock.now += 1
    assert watch.check() is None and newest_finished(tmp_path) == 2
    checkpoint(tmp_path, 3)
    clock.now += 1
    why = watch.check()
    assert why is not None
    assert "after epoch 3" in why and "epoch-3.pt" in why and "3 workers" in why


def test_no_stop_at_the_last_epochs_checkpoint(tmp_path: Path) -> None:
    """A grow asked during the last epoch: its checkpoint ends the run, which finishes (a new
    attempt would resume with nothing to train)."""
    checkpoint(tmp_path, 9)
    clock = Clock()
    watch = GrowWatch(lambda: 3, tmp_path, clock=clock, last_epoch=10)
    assert watch.check() is None and watch.asked == 3
    checkpoint(tmp_path, 10)
    clock.now += 5
    assert watch.check() is None, "the last epoch's checkpoint is no epoch boundary to stop at"
    unbounded = GrowWatch(lambda: 3, tmp_path, clock=clock)
    checkpoint(tmp_path, 11)  # (without last_epoch: any newer checkpoint is a boundary)
    assert unbounded.check() is None
    checkpoint(tmp_path, 12)
    clock.now += 5
    assert unbounded.check() is not None


def test_supervise_stops_every_process_for_a_grow(tmp_path: Path) -> None:
    running = job(FakeProc("w0/trainer-0", None), FakeProc("w1/trainer-0", None))
    clock = Clock()
    watch = GrowWatch(lambda: 2, tmp_path, clock=clock)
    checkpoint(tmp_path, 1)

    def stop_soon() -> str | None:
        clock.now += 1
        if clock.now > 103:
            checkpoint(tmp_path, 2)
        return GrowWatch.check(watch)

    watch.check = stop_soon  # type: ignore[method-assign]
    with pytest.raises(RescaleStop) as e:
        _supervise(running, 60, Console(), watch)
    assert "after epoch 2" in str(e.value)
    assert all(r.proc.poll() is not None for r in running), "a DGL process was left running"


def test_the_rescale_exit_code_and_what_it_says() -> None:
    end = outcome.Ending("", "DGL-API", None)
    console = Console()
    said: list[str] = []
    console.say = lambda text: said.append(text)  # type: ignore[method-assign]
    code = outcome.rescaling(end, console, Report(), "stopped at the epoch boundary after epoch 3")
    assert code == RESCALE_EXIT_CODE == 75
    assert said == ["dglrun: stopped at the epoch boundary after epoch 3"]

    class Last:
        outcome: str | None = "unset"

        def finish(self, o: str | None) -> None:
            self.outcome = o

    progress = Last()
    outcome.finish_progress(end, progress, code)  # type: ignore[arg-type]
    assert progress.outcome == "abandoned", "the operator clears the progress for the next attempt"


def test_the_partitioner_without_a_count_reads_it_from_the_job() -> None:
    o = options.parse(ARGS, {**SKIP, ELASTIC.env: ELASTIC.write(True)})
    assert o.count_from_job and o.num_partitions == 2 and o.global_batch is None
    answers: list[list[str] | None] = [None, None, ["j-worker-0", "j-worker-2"]]
    said: list[str] = []
    slept: list[float] = []
    count = wait_for_count(lambda: answers.pop(0), said.append, interval=2.0, sleep=slept.append)
    assert count == 2 and slept == [2.0, 2.0]
    assert said == [
        "elastic: waiting for the operator to choose this attempt's workers",
        "elastic: the attempt's 2 workers: j-worker-0, j-worker-2",
    ]


def test_members_reads_the_status_field() -> None:
    outputs = ["", '["j-worker-0","j-worker-1"]', "not json"]

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, outputs.pop(0), "")

    p = ReportProgress("kubectl", "job", 1, print, interval=3600, run=run)
    try:
        assert p.members() is None
        assert p.members() == ["j-worker-0", "j-worker-1"]
        assert p.members() is None
    finally:
        p.finish(None)


def test_a_partitioner_that_cannot_ask_says_why() -> None:
    with pytest.raises(PhaseError, match="reads its partition count from the DGLJob's status"):
        wait_for_count(None, print)


def test_a_rescale_stop_is_not_a_phase_failure(tmp_path: Path) -> None:
    from launcher.console import phase

    with (
        pytest.raises(RescaleStop, match="after epoch 4"),
        phase(Console(), Report(), 5, "train"),
    ):
        raise RescaleStop("stopped at the epoch boundary after epoch 4")
