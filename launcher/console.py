"""What dglrun tells the user: numbered phase lines, prefixed process output, the figures of
the summary line, and the one-line errors every phase raises; and the interface of where its
progress goes besides (:class:`Progress`: the DGLJob's status and Events, launcher.report).

A phase (:func:`phase`) prints ``[k/5] name`` and ``[k/5] name done in 1.2s``; an expected
failure inside it (a bad file, a worker that cannot be reached) becomes a :class:`PhaseError`
``<phase> failed: <why>``, the line dglrun ends with (and the pod's termination message).
When a process of the phase was killed for memory (:mod:`launcher.workers.oom`), the error is an
:class:`OutOfMemory` whose line starts ``OOMKilled: <process> in pod <pod> ...``; when one refused
a file it was to load (:mod:`launcher.workers.refusal`), a :class:`Refused` whose line starts
``refused: `` and quotes the process, naming the file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Protocol

from launcher.errors import LauncherError
from launcher.plans.memory import PlanError, Step
from launcher.plans.time import Estimate
from launcher.workers import oom
from launcher.workers.remote import peak_mb
from podcontract import logline

TOTAL = 5
NORMAL, WARNING = "Normal", "Warning"  # the types of a Kubernetes Event (Progress.event)


# -- where a run's progress goes besides the console: the DGLJob's status.progress and its
# Events (launcher.report.progress.ReportProgress in a pod; NoProgress elsewhere)


class Progress(Protocol):
    def phase(self, k: int, total: int, name: str) -> None: ...

    def output(self, label: str, text: str) -> None: ...

    def record(self, field: str, value: object) -> None:
        """Publish ``status.<field>`` with the next progress (``partitionSeconds``: the
        DistParMETIS partition ran in the launcher, where no pod's runtime shows it)."""
        ...

    def event(self, type_: str, reason: str, message: str) -> None:
        """An Event on the DGLJob (``type_`` Normal or Warning)."""
        ...

    def expect(self, plan: Estimate) -> None:
        """The time plan's estimate of the partition step: its first ETA."""
        ...

    def finish(self, outcome: str | None) -> None: ...


class NoProgress:
    def phase(self, k: int, total: int, name: str) -> None:
        pass

    def record(self, field: str, value: object) -> None:
        pass

    def output(self, label: str, text: str) -> None:
        pass

    def event(self, type_: str, reason: str, message: str) -> None:
        pass

    def expect(self, plan: Estimate) -> None:
        pass

    def finish(self, outcome: str | None) -> None:
        pass


class PhaseError(LauncherError, RuntimeError):
    """A phase failed; ``str()`` is the one line a user sees."""


class OutOfMemory(PhaseError):
    """A phase failed because the kernel killed one of its processes for memory; ``str()``
    starts with podcontract's ``OOM_PREFIX`` and names the process and its pod."""


class Refused(PhaseError):
    """A phase failed because one of its processes refused a file it was to load (a checkpoint
    or a model that could run code: launcher.workers.refusal); ``str()`` starts with
    podcontract's ``REFUSED_PREFIX`` and quotes the process's refusal, which names the file."""


# Failures outside any phase (reading the hostfile, setting up a transport, fetching the
# results) are reported the same way as a phase's: one line, no traceback.
USER_ERRORS = (LauncherError, OSError)


@dataclass
class Report:
    """What the summary line prints."""

    seconds: dict[str, float] = field(default_factory=dict)
    dispatch_bytes: int = 0
    metrics: dict[str, object] = field(default_factory=dict)
    partition: dict[str, object] = field(default_factory=dict)  # the ParMETIS modes' figures
    memory: list[Step] = field(default_factory=list)  # the memory plan's steps
    # (size, sha256) of the partition set's files, when phase 1 knows them (the cache's)
    partition_files: dict[str, tuple[int, str]] = field(default_factory=dict)


class Console:
    """Serialised output: progress lines from dglrun, prefixed lines from processes."""

    def __init__(
        self, write: Callable[[str], None] | None = None, progress: Progress | None = None
    ) -> None:
        self._write = write or (lambda s: print(s, flush=True))
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}
        self._peaks: dict[str, float] = {}
        self._sampled: dict[str, float] = {}
        self._killed: list[tuple[str, oom.Killed]] = []
        self._copy: IO[str] | None = None
        self.progress: Progress = progress or NoProgress()

    def say(self, text: str) -> None:
        with self._lock:
            self._write(text)
            if self._copy is not None:
                try:
                    self._copy.write(logline.stamped(text) + "\n")
                except OSError:
                    self._copy = None  # (the storage went away: the pod's log still has it)

    def copy_to(self, file: IO[str] | None) -> None:
        """Also write every line to ``file`` (the job's storage keeps the log), each with its
        time first (:func:`podcontract.logline.stamped`)."""
        with self._lock:
            self._copy = file

    def line(self, label: str, text: str) -> None:
        sample = logline.memory_mib(text)
        if sample is not None:  # (a sample of the pod's: its largest kept, not a last line)
            with self._lock:
                self._sampled[label] = max(sample, self._sampled.get(label, 0.0))
            self.say(f"[{label}] {text}")
            return
        peak, killed = peak_mb(text), oom.parse_line(text)
        with self._lock:
            # launcher.workers.remote's own last words are not what the process said
            if peak is not None:
                self._peaks[label] = peak
            elif killed is not None:
                self._killed.append((label, killed))
            else:
                self._last[label] = text
        self.say(f"[{label}] {text}")
        self.progress.output(label, text)

    def sampled_peaks(self) -> dict[str, float]:
        """``label -> MiB``: the largest memory sample of the pod a process ran in, among the
        samples it gave while it ran (:func:`oom.sample_memory`: anonymous and shared memory,
        not the page cache)."""
        with self._lock:
            return dict(self._sampled)

    def killed_for_memory(self, label: str, killed: oom.Killed) -> None:
        """A process of this machine's (not under launcher.workers.remote) was killed for memory."""
        with self._lock:
            self._killed.append((label, killed))
        self.say(f"[{label}] killed for memory (container memory limit {killed.limit})")

    def out_of_memory(self) -> str | None:
        """``OOMKilled: <process> in pod <pod> ...`` for the first process seen killed for
        memory, None if none was."""
        with self._lock:
            if not self._killed:
                return None
            label, killed = self._killed[0]
        return killed.describe(label.rpartition("/")[2])

    def last_line(self, label: str) -> str:
        """The last line a process labelled ``label`` printed ("" if none; launcher.workers.remote's
        peak memory line does not count)."""
        with self._lock:
            return self._last.get(label, "")

    def peaks(self) -> dict[str, float]:
        """``label -> MiB``: the peak memory of each process that ran under launcher.workers.remote
        and has ended (e.g. ``worker-0/server-0``)."""
        with self._lock:
            return dict(self._peaks)


@contextmanager
def phase(console: Console, report: Report, k: int, name: str) -> Iterator[None]:
    console.say(f"[{k}/{TOTAL}] {name}")
    console.progress.phase(k, TOTAL, name)
    started = time.monotonic()
    try:
        yield
    except (PlanError, Refused):
        raise  # the memory plan's or a process's refusal says all; the operator reads its start
    except USER_ERRORS as e:
        # (a process killed for memory is why its phase failed, whatever else broke then)
        killed = console.out_of_memory()
        if killed is not None:
            raise OutOfMemory(f"{killed}; {name} failed: {e}") from e
        raise PhaseError(f"{name} failed: {e}") from e
    took = time.monotonic() - started
    report.seconds[name] = took
    console.say(f"[{k}/{TOTAL}] {name} done in {took:.1f}s")


@contextmanager
def memory_samples(console: Console, label: str) -> Iterator[None]:
    """While inside, say this pod's memory as ``[label] <memory line>`` (:func:`oom.sample_memory`:
    the launcher's and the partitioner's pods; the workers' processes say theirs through
    launcher.workers.remote)."""
    stop = oom.sample_memory(lambda line: console.say(f"[{label}] {line}"))
    try:
        yield
    finally:
        stop.set()


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
