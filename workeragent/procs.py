"""The agent's process table: the processes dglrun asked for, their output, their ends.

Each process runs in a session of its own (``start_new_session``), so that a signal reaches
the whole of what it started (an MPI daemon's ranks, a shell's children): signals go to the
process group. Its stdout and stderr are one pipe (one ordered stream, as a terminal would
show them); a reader thread appends what comes to an :class:`OutputRing`, which numbers bytes
with absolute offsets from the process's first byte and keeps the last ``buffer_bytes``. A
reader (dglrun) asks for what follows the offset it has; one that was cut off asks again from
the same offset and gets the rest exactly once, or learns how many bytes were dropped meanwhile.

A process has ended once its output is closed (all read) and it was reaped; only then is its
exit code given, with the last bytes. A process killed by signal N exits 128+N, as a shell
says. dglrun touches the table with every request; when processes run and nobody has asked
anything for ``orphan_grace`` seconds, dglrun is gone: the table stops them all (SIGTERM, then
SIGKILL) and says so on the agent's stdout. An agent that is the pod's PID 1 also reaps the
zombies it inherits (processes whose parent died), which no one else would.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import NamedTuple

from podcontract import logline

ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_READ = 1 << 20  # bytes given per read: a reader asks again for the rest
PIPE_READ = 1 << 16
SIGNALS = {
    name: signal.Signals[name]
    for name in ("SIGTERM", "SIGINT", "SIGKILL", "SIGHUP", "SIGUSR1", "SIGUSR2")
}
ORPHAN_TERM_WAIT = 10.0  # seconds between SIGTERM and SIGKILL for orphans
KILL_WAIT = 10.0  # seconds a stop waits for the end after SIGKILL (output held open elsewhere)
ADOPTED_INTERVAL = 5.0  # seconds between two looks for adopted zombies (PID 1 only)


class ProcError(Exception):
    """A request the table refuses; the message names the field or the process."""


class InvalidProcRequest(ProcError):
    """Bad input: an id, argv, env, cwd, offset or signal that cannot be."""


class UnknownProcId(ProcError):
    """No process has that id (never had, or it was forgotten)."""


class ProcIdConflict(ProcError):
    """The id exists with another argv, or the process is in the wrong state for the request."""


class ProcStartFailed(ProcError):
    """The program cannot be started (not found, not executable): ``cannot start X: why``."""


class ProcOutput(NamedTuple):
    """A read's answer: ``data`` from absolute offset ``start`` up to ``next``; ``skipped``
    bytes between the offset asked for and ``start`` were dropped from the buffer; ``exit``
    is set once the process has ended and ``next`` is the end of its output."""

    start: int
    next: int
    data: bytes
    exit: int | None
    skipped: int


class OutputRing:
    """Bytes numbered from 0 as they are appended, of which the last ``capacity`` are kept.

    A bytearray with a head index: dropping from the front moves the head, and the dead prefix
    is cut off once it is as long as the capacity (each byte is moved at most once more).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._buf = bytearray()
        self._head = 0  # index in _buf of the byte at offset `start`
        self.start = 0  # the first offset kept: also how many bytes were dropped
        self.end = 0  # the offset the next byte will have

    def append(self, data: bytes) -> None:
        self._buf += data
        self.end += len(data)
        excess = len(self._buf) - self._head - self.capacity
        if excess > 0:
            self._head += excess
            self.start += excess
        if self._head >= self.capacity:
            del self._buf[: self._head]
            self._head = 0

    def slice(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset`` (``start <= offset <= end``)."""
        i = self._head + offset - self.start
        return bytes(self._buf[i : i + min(limit, self.end - offset)])


def exit_code(returncode: int) -> int:
    """A shell's exit status: the code, or 128+N for a process killed by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


class ManagedProc:
    """One process of the table: its output (read by its own thread) and its end."""

    def __init__(self, proc_id: str, argv: list[str], popen: subprocess.Popen[bytes], cap: int):
        self.id = proc_id
        self.argv = argv
        self.pid = popen.pid
        self._popen = popen
        self.output = OutputRing(cap)
        self.cond = threading.Condition()
        self.exit: int | None = None  # set once the output is drained and the process reaped
        self._reader = threading.Thread(target=self._pump, name=f"output-{proc_id}", daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        stream = self._popen.stdout
        assert stream is not None
        try:
            while True:
                try:
                    data = os.read(stream.fileno(), PIPE_READ)
                except OSError:
                    data = b""
                if not data:
                    break
                with self.cond:
                    self.output.append(data)
                    self.cond.notify_all()
        finally:
            stream.close()
        code = exit_code(self._popen.wait())
        with self.cond:
            self.exit = code
            self.cond.notify_all()

    @property
    def running(self) -> bool:
        return self.exit is None

    def read(self, offset: int, wait: float) -> ProcOutput:
        """What follows ``offset``; waits up to ``wait`` seconds for a byte or the end."""
        with self.cond:
            if offset > self.output.end:
                raise InvalidProcRequest(
                    f"offset: {offset} is past the end of {self.id}'s output ({self.output.end})"
                )
            self.cond.wait_for(
                lambda: self.output.end > offset or self.exit is not None, timeout=wait
            )
            start = max(offset, self.output.start)
            data = self.output.slice(start, MAX_READ)
            nxt = start + len(data)
            done = self.exit is not None and nxt == self.output.end
            return ProcOutput(start, nxt, data, self.exit if done else None, start - offset)

    def signal_group(self, sig: int) -> None:
        """``sig`` to the process's group (its session: it and what it started)."""
        with contextlib.suppress(ProcessLookupError):  # (all gone)
            os.killpg(self.pid, sig)

    def wait_end(self, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.exit is not None, timeout=timeout)

    def describe(self) -> dict[str, object]:
        with self.cond:
            return {
                "id": self.id,
                "pid": self.pid,
                "argv": self.argv,
                "running": self.exit is None,
                "exit": self.exit,
                "end": self.output.end,
            }


class ProcTable:
    """The processes by id. Every method is safe to call from any thread."""

    def __init__(
        self,
        workdir: str,
        buffer_bytes: int,
        orphan_grace: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        log: Callable[[str], None] = logline.say,
    ) -> None:
        self.workdir = workdir
        self.buffer_bytes = buffer_bytes
        self.orphan_grace = orphan_grace
        self._clock = clock
        self._log = log
        self._lock = threading.Lock()
        self._procs: dict[str, ManagedProc] = {}
        self._last_touch = clock()

    # -- the table ------------------------------------------------------------------------

    def start(
        self,
        proc_id: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None,
    ) -> tuple[ManagedProc, bool]:
        """The process ``proc_id`` running ``argv``, and whether it was started now (False:
        it existed with that argv, a retried request). ``env`` updates the agent's own
        environment; a relative ``cwd`` resolves against the agent's workdir."""
        if not isinstance(proc_id, str) or not ID_PATTERN.fullmatch(proc_id):
            raise InvalidProcRequest(
                f"id: {proc_id!r} is not 1 to 128 characters of A-Z a-z 0-9 . _ -"
            )
        argv = list(argv)
        with self._lock:
            existing = self._procs.get(proc_id)
            if existing is not None:
                if existing.argv == argv:
                    return existing, False
                raise ProcIdConflict(
                    f"id: {proc_id} exists and runs another argv ({existing.argv!r})"
                )
            workdir = os.path.join(self.workdir, cwd) if cwd else self.workdir
            if not os.path.isdir(workdir):
                raise InvalidProcRequest(f"cwd: {workdir} is not a directory")
            full_env = dict(os.environ)
            full_env.update(env)
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=full_env,
                    cwd=workdir,
                    start_new_session=True,
                    bufsize=0,
                )
            except OSError as e:
                raise ProcStartFailed(f"cannot start {argv[0]}: {e.strerror or e}") from e
            proc = ManagedProc(proc_id, argv, popen, self.buffer_bytes)
            self._procs[proc_id] = proc
            return proc, True

    def get(self, proc_id: str) -> ManagedProc:
        with self._lock:
            proc = self._procs.get(proc_id)
        if proc is None:
            raise UnknownProcId(f"no process {proc_id!r}")
        return proc

    def list(self) -> builtins.list[ManagedProc]:
        with self._lock:
            return list(self._procs.values())

    def read(self, proc_id: str, offset: int, wait: float) -> ProcOutput:
        return self.get(proc_id).read(offset, wait)

    def signal(self, proc_id: str, name: str) -> None:
        """Signal ``name`` (SIGTERM, SIGINT, SIGKILL, SIGHUP, SIGUSR1, SIGUSR2) to the
        process's whole group."""
        sig = SIGNALS.get(name)
        if sig is None:
            raise InvalidProcRequest(f"signal: {name!r} is not one of {', '.join(SIGNALS)}")
        proc = self.get(proc_id)
        if not proc.running:
            raise ProcIdConflict(f"{proc_id} has ended (exit {proc.exit})")
        proc.signal_group(sig)

    def stop(self, proc_id: str, grace: float) -> int | None:
        """SIGTERM to the group, ``grace`` seconds, SIGKILL, and its exit code (None if it
        has still not ended: its output is held open by a process outside its group)."""
        proc = self.get(proc_id)
        if proc.running:
            proc.signal_group(signal.SIGTERM)
            if not proc.wait_end(grace):
                proc.signal_group(signal.SIGKILL)
                proc.wait_end(KILL_WAIT)
        return proc.exit

    def stop_all(self, grace: float) -> builtins.list[str]:
        """Stop every running process at once (SIGTERM, ``grace`` seconds, SIGKILL); their
        ids."""
        running = [p for p in self.list() if p.running]
        for p in running:
            p.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in running:
            p.wait_end(max(0.0, deadline - time.monotonic()))
        stubborn = [p for p in running if p.running]
        for p in stubborn:
            p.signal_group(signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT
        for p in stubborn:
            p.wait_end(max(0.0, deadline - time.monotonic()))
        return [p.id for p in running]

    def forget(self, proc_id: str) -> None:
        """Drop an ended process and its output."""
        with self._lock:
            proc = self._procs.get(proc_id)
            if proc is None:
                raise UnknownProcId(f"no process {proc_id!r}")
            if proc.running:
                raise ProcIdConflict(f"{proc_id} is running: stop it before forgetting it")
            del self._procs[proc_id]

    # -- orphans --------------------------------------------------------------------------

    def touch(self) -> None:
        """dglrun is there (an authenticated request)."""
        self._last_touch = self._clock()

    def reap_orphans(self) -> builtins.list[str]:
        """When processes run and nobody asked anything for ``orphan_grace`` seconds: stop
        them all (SIGTERM, ORPHAN_TERM_WAIT seconds, SIGKILL), say so, and return their ids."""
        if self.orphan_grace <= 0:
            return []
        silent = self._clock() - self._last_touch
        if silent < self.orphan_grace or not any(p.running for p in self.list()):
            return []
        stopped = self.stop_all(ORPHAN_TERM_WAIT)
        self._log(
            f"dgl-agent: no request from dglrun for {silent:.0f}s (orphan grace "
            f"{self.orphan_grace:g}s): stopped {len(stopped)} process(es): {', '.join(stopped)}"
        )
        self.touch()  # (one line per grace, not per check, for a process that will not die)
        return stopped

    def watch_orphans(self, stop: threading.Event) -> None:
        """Check for orphans about every second until ``stop`` is set (a thread's target)."""
        if self.orphan_grace <= 0:
            return
        interval = min(1.0, self.orphan_grace / 4)
        while not stop.wait(interval):
            self.reap_orphans()

    # -- adopted children -----------------------------------------------------------------

    def reap_adopted(self, also_known: Collection[int] = ()) -> builtins.list[int]:
        """Reap the agent's zombie children that are no running process of the table (nor
        in ``also_known``); their pids. As the pod's PID 1, the agent inherits every process
        whose parent died (a shell's background job, a daemon's child), and nobody else would
        reap them. (The table's lock: no process is being started, unknown yet, meanwhile.)"""
        me = os.getpid()
        reaped = []
        with self._lock:
            known = {p.pid for p in self._procs.values() if p.running} | set(also_known)
            for pid in zombie_children(me):
                if pid in known:
                    continue
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        reaped.append(pid)
                except ChildProcessError:
                    pass
        return reaped

    def watch_adopted(self, stop: threading.Event, also_known: Collection[int] = ()) -> None:
        """Reap adopted zombies every few seconds until ``stop`` is set (a thread's target,
        for an agent that is PID 1)."""
        while not stop.wait(ADOPTED_INTERVAL):
            self.reap_adopted(also_known)


def zombie_children(parent: int) -> builtins.list[int]:
    """The pids of ``parent``'s children that have exited and wait to be reaped (/proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # (gone meanwhile)
        if len(fields) > 1 and fields[0] == b"Z" and int(fields[1]) == parent:
            found.append(int(entry))
    return found
