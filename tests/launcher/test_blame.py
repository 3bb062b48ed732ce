"""Which failed DGL process dglrun names: the cause, not a peer that died of it, whichever
exit is noticed first (launcher/workers/blame.py, launcher.training.train._supervise)."""

from __future__ import annotations

import time

import pytest

from launcher.console import Console, PhaseError
from launcher.training.train import _Running, _supervise
from launcher.workers import blame
from tests.launcher.fake_procs import FakeProc, job

RESET = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:525] Read error "
    "[10.231.12.3]:64237: Connection reset by peer"
)
CRASH = "crash_train: exiting with code 1"


def failure(running: list[_Running]) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(PhaseError) as e:
        _supervise(running, 60, Console())
    assert all(r.proc.poll() is not None for r in running), "a DGL process was left running"
    return str(e.value), time.monotonic() - started


def test_the_crash_is_named_when_its_victim_is_polled_first_in_the_same_pass() -> None:
    # worker-0's trainer comes first in dglrun's list; both have exited when it looks
    said, took = failure(job(FakeProc("w0", 0, last=RESET), FakeProc("w1", 0, last=CRASH)))
    assert said.startswith("trainer 0 on worker-1 (10.0.0.1) exited with code 1"), said
    assert CRASH in said and "stopped every DGL process on every worker" in said
    assert took < blame.CAUSE_WINDOW, "dglrun waited although it had the cause"


def test_the_crash_is_named_when_its_victim_exits_first() -> None:
    said, took = failure(job(FakeProc("w0", 0, last=RESET), FakeProc("w1", 0.5, last=CRASH)))
    assert said.startswith("trainer 0 on worker-1 (10.0.0.1) exited with code 1"), said
    assert 0.5 <= took < blame.CAUSE_WINDOW


def test_the_crash_is_named_at_once_when_it_exits_first() -> None:
    said, took = failure(job(FakeProc("w0", 5, last=RESET), FakeProc("w1", 0, last=CRASH)))
    assert said.startswith("trainer 0 on worker-1"), said
    assert took < 1, "dglrun waited although the first failure was not a consequence"


def test_a_lone_peer_reset_is_named_once_the_window_passes() -> None:
    # the cause never exits (a peer that hung): the reset is all dglrun can name
    said, took = failure(job(FakeProc("w0", 0, last=RESET), FakeProc("w1", None)))
    assert said.startswith("trainer 0 on worker-0 (10.0.0.0) exited with code 1"), said
    assert "Connection reset by peer" in said
    assert blame.CAUSE_WINDOW <= took < blame.CAUSE_WINDOW + 2


def test_two_causes_name_the_first_seen() -> None:
    said, _ = failure(
        job(FakeProc("w0", 0, code=137, last="epoch 3"), FakeProc("w1", 0, last=CRASH))
    )
    assert said.startswith("trainer 0 on worker-0 (10.0.0.0) exited with code 137"), said


@pytest.mark.parametrize(
    ("line", "consequence"),
    [
        (RESET, True),
        ("RuntimeError: [gloo/transport/tcp/pair.cc:589] Connection closed by peer", True),
        ("BrokenPipeError: [Errno 32] Broken pipe", True),
        (CRASH, False),
        ("torch.cuda.OutOfMemoryError: out of memory", False),
        ("", False),
    ],
)
def test_what_counts_as_a_consequence(line: str, consequence: bool) -> None:
    assert blame.is_consequence(line) is consequence


def test_cause_needs_a_failure() -> None:
    with pytest.raises(ValueError, match="no failures"):
        blame.cause([], str)
