"""launcher.partition.parmetis_modes.run_mpirun: how dglrun ends an mpirun, with a real child
process standing in for it (real MPI runs in tests/examples/test_parmetis.py and
tests/launcher/test_launcher_in_a_pod.py): its exit, the phase's timeout, and a rank's failure
that Open MPI's teardown then never ends (seen: test_a_rank_killed_in_its_pod_... hung)."""

from __future__ import annotations

import sys
import time

import pytest

from launcher.console import Console, PhaseError, Report
from launcher.partition import parmetis_modes
from launcher.workers.transport import LineSink, PopenProc, Proc

HOSTS = ["j-worker-0", "j-worker-1"]
KILLED = "launcher.remote: MPI rank 1 was killed by SIGKILL"
STARTED = "launcher.remote: MPI rank 0 started\nlauncher.remote: MPI rank 1 started"


def mpirun(*lines: str, then: str) -> tuple[object, list[Proc], list[str]]:
    """A start() for run_mpirun: a child that prints ``lines``, then runs ``then``; the
    procs it started and the cleanups called."""
    started: list[Proc] = []
    cleaned: list[str] = []
    code = "".join(f"print({line!r}, flush=True)\n" for line in lines) + then

    def start(sink: LineSink) -> Proc:
        started.append(PopenProc("partition", [sys.executable, "-c", code], sink))
        return started[-1]

    return start, started, cleaned


def run(start: object, cleaned: list[str], timeout: float, said: list[str] | None = None) -> str:
    with pytest.raises(PhaseError) as info:
        parmetis_modes.run_mpirun(
            start,  # type: ignore[arg-type]
            Console(write=(said if said is not None else []).append),
            Report(),
            timeout=timeout,
            hosts=HOSTS,
            cleanup=lambda: cleaned.append("every rank"),
        )
    return str(info.value)


def test_a_rank_failure_mpirun_never_ends_after_stops_it_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parmetis_modes, "RANK_FAILURE_GRACE", 1.0)
    start, started, cleaned = mpirun(KILLED, then="import time; time.sleep(120)")
    began = time.monotonic()
    why = run(start, cleaned, timeout=60)  # (before: to this timeout, forever without one)
    assert why == (
        "MPI rank 1 on j-worker-1 was killed by SIGKILL; mpirun had not ended 1s later; "
        "stopped every MPI rank"
    )
    assert time.monotonic() - began < 60
    assert started[0].wait(5) != 0 and cleaned == ["every rank"]  # stopped, ranks killed


def test_without_a_rank_failure_only_the_phase_timeout_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parmetis_modes, "RANK_FAILURE_GRACE", 0.5)
    # a rank that exited 0 says nothing: mpirun is left to end by itself, or by the timeout
    start, started, cleaned = mpirun(STARTED, "step 1", then="import time; time.sleep(120)")
    assert run(start, cleaned, timeout=3) == "timed out after 3s; stopped every MPI rank"
    assert started[0].wait(5) != 0 and cleaned == ["every rank"]


def test_mpirun_ending_within_the_grace_is_told_by_its_own_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parmetis_modes, "RANK_FAILURE_GRACE", 30.0)
    start, _, cleaned = mpirun(
        KILLED,
        "Process name: [[1234,1],1]",
        "Exit code: 137",
        then="import time, sys; time.sleep(1); sys.exit(137)",
    )
    assert run(start, cleaned, timeout=0) == (
        "MPI rank 1 on j-worker-1 was killed by SIGKILL (exit code 137); stopped every MPI rank"
    )
    assert cleaned == ["every rank"]


def test_a_rank_that_never_starts_stops_mpirun_naming_its_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mpirun waits forever for a daemon that never calls back (seen in the fake cluster:
    one worker's daemon gone, no rank started anywhere, dglrun waiting on mpirun for good)."""
    monkeypatch.setattr(parmetis_modes, "RANK_START_TIMEOUT", 1.0)
    start, started, cleaned = mpirun(
        "launcher.remote: MPI rank 0 started", then="import time; time.sleep(120)"
    )
    said: list[str] = []
    assert run(start, cleaned, timeout=60, said=said) == (
        "no MPI rank started on j-worker-1 within 1s (mpirun's daemon there did not start, "
        "or did not call back); stopped every MPI rank"
    )
    assert started[0].wait(5) != 0 and cleaned == ["every rank"]
    assert not any("started" in line for line in said), said  # (dglrun's own line: not shown)
