"""The process table in this process (real child processes): the output ring's offsets, exit
codes, and the orphan reaper on an injected clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.agents import python_env
from tests.support.waiting import wait_for
from workeragent.procs import (
    InvalidProcRequest,
    OutputRing,
    ProcIdConflict,
    ProcStartFailed,
    ProcTable,
    UnknownProcId,
    exit_code,
)


def test_the_ring_keeps_the_last_bytes_with_absolute_offsets() -> None:
    ring = OutputRing(10)
    for i in range(100):  # one byte at a time: the dead prefix is cut off again and again
        ring.append(bytes([48 + i % 10]))
    assert (ring.start, ring.end) == (90, 100)
    assert ring.slice(90, 100) == b"0123456789"
    assert ring.slice(95, 3) == b"567"
    assert ring.slice(100, 5) == b""
    ring.append(b"abcdefghijklmnop")  # more than the capacity at once
    assert (ring.start, ring.end) == (106, 116)
    assert ring.slice(106, 100) == b"ghijklmnop"


def test_the_ring_keeps_everything_below_its_capacity() -> None:
    """The twin: nothing is dropped while the output fits."""
    ring = OutputRing(1000)
    for i in range(100):
        ring.append(b"%02d" % i)
    assert (ring.start, ring.end) == (0, 200)
    assert ring.slice(0, 1000) == b"".join(b"%02d" % i for i in range(100))


def test_a_signal_death_is_128_plus_the_signal() -> None:
    assert exit_code(0) == 0 and exit_code(3) == 3
    assert exit_code(-9) == 137 and exit_code(-15) == 143


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def table(tmp_path: Path) -> ProcTable:
    return ProcTable(str(tmp_path), 1 << 16, 2.0, clock=FakeClock(), log=lambda line: None)


def test_orphans_are_stopped_after_the_grace_without_a_touch(tmp_path: Path) -> None:
    clock = FakeClock()
    said: list[str] = []
    table = ProcTable(str(tmp_path), 1 << 16, 2.0, clock=clock, log=said.append)
    proc, _ = table.start("sleeper", ["sleep", "60"], {}, None)
    clock.now += 1.9
    assert table.reap_orphans() == [] and proc.running
    clock.now += 0.2
    assert table.reap_orphans() == ["sleeper"]
    assert proc.exit == 128 + 15
    assert len(said) == 1 and "no request from dglrun" in said[0] and "sleeper" in said[0]


def test_a_touch_keeps_the_processes(tmp_path: Path) -> None:
    """The twin: the same wait past the grace, with a request in between."""
    clock = FakeClock()
    table = ProcTable(str(tmp_path), 1 << 16, 2.0, clock=clock, log=lambda line: None)
    proc, _ = table.start("sleeper", ["sleep", "60"], {}, None)
    clock.now += 1.5
    table.touch()
    clock.now += 1.5
    try:
        assert table.reap_orphans() == [] and proc.running
    finally:
        assert table.stop("sleeper", 5.0) == 143


def test_a_zero_grace_never_stops_them(tmp_path: Path) -> None:
    clock = FakeClock()
    table = ProcTable(str(tmp_path), 1 << 16, 0.0, clock=clock, log=lambda line: None)
    proc, _ = table.start("sleeper", ["sleep", "60"], {}, None)
    clock.now += 1e6
    try:
        assert table.reap_orphans() == [] and proc.running
    finally:
        table.stop("sleeper", 5.0)


def test_read_waits_for_bytes_and_gives_the_exit_with_the_last_ones(table: ProcTable) -> None:
    code = "import sys, time; print('a', flush=True); time.sleep(0.3); print('b'); sys.exit(4)"
    table.start("p", [sys.executable, "-c", code], {}, None)
    first = table.read("p", 0, wait=10)  # (returns with the first bytes, before the end)
    assert first.data and b"b" not in first.data and first.exit is None and first.skipped == 0
    data = first.data
    offset = first.next
    while True:
        out = table.read("p", offset, wait=10)
        assert out.start == offset and out.skipped == 0
        data += out.data
        offset = out.next
        if out.exit is not None:
            break
    assert data == b"a\nb\n" and out.exit == 4 and out.next == 4


def test_the_table_refuses_what_cannot_be(table: ProcTable, tmp_path: Path) -> None:
    with pytest.raises(InvalidProcRequest, match=r"^id: "):
        table.start("a/b", ["true"], {}, None)
    with pytest.raises(InvalidProcRequest, match=r"^cwd: "):
        table.start("a", ["true"], {}, "no-such-dir")
    with pytest.raises(ProcStartFailed, match=r"^cannot start /no/such/program: No such file"):
        table.start("a", ["/no/such/program"], {}, None)
    with pytest.raises(UnknownProcId):
        table.get("nobody")
    proc, created = table.start("a", ["sleep", "60"], {}, None)
    assert created
    again, created = table.start("a", ["sleep", "60"], {}, None)
    assert again is proc and not created
    with pytest.raises(ProcIdConflict, match="another argv"):
        table.start("a", ["sleep", "61"], {}, None)
    with pytest.raises(ProcIdConflict, match="running"):
        table.forget("a")
    with pytest.raises(InvalidProcRequest, match=r"^signal: 'SIGSTOP'"):
        table.signal("a", "SIGSTOP")
    with pytest.raises(InvalidProcRequest, match=r"^offset: 5 is past the end"):
        table.read("a", 5, 0)
    assert table.stop("a", 5.0) == 143
    with pytest.raises(ProcIdConflict, match="has ended"):
        table.signal("a", "SIGTERM")
    table.forget("a")
    with pytest.raises(UnknownProcId):
        table.get("a")
    wait_for(lambda: not table.list(), what="an empty table")


ADOPTING = """
import ctypes, os, sys, time
from workeragent.procs import ProcTable, zombie_children

def until(predicate):
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)

# a subreaper gets its descendants' orphans, as the pod's PID 1 does
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
table = ProcTable(sys.argv[1], 1 << 16, 0.0)
me = os.getpid()
# an orphan: the shell exits at once, its background sleep later (adopted by us)
orphan_maker, _ = table.start("p", ["sh", "-c", "sleep 0.2 >/dev/null & echo $!"], {}, None)
until(lambda: not orphan_maker.running)
orphan = int(table.read("p", 0, 0).data)
until(lambda: orphan in zombie_children(me))
print("zombie before", orphan in zombie_children(me))
# a process of the table that has exited but is not reaped yet (its output is held open)
held, _ = table.start("q", ["sh", "-c", "sleep 0.5 & exit 3"], {}, None)
until(lambda: held.pid in zombie_children(me))
reaped = table.reap_adopted()
print("reaped", reaped == [orphan], orphan in zombie_children(me))
until(lambda: not held.running)
print("table's exit", held.exit)
"""


def test_adopted_zombies_are_reaped_but_not_the_tables(tmp_path: Path) -> None:
    """As a subreaper (what the pod's PID 1 is): the orphan's zombie stays until reaped (the
    twin: before reap_adopted), and a process of the table keeps its own exit code."""
    p = subprocess.run(
        [sys.executable, "-c", ADOPTING, str(tmp_path)],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["zombie before True", "reaped True False", "table's exit 3"]
