"""What dglrun tells the user: numbered phase lines, prefixed process output, the figures of
the summary line, and the one-line errors every phase raises.

A phase (:func:`phase`) prints ``[k/5] name`` and ``[k/5] name done in 1.2s``; an expected
failure inside it (a bad file, a worker that cannot be reached) becomes a :class:`PhaseError`
``<phase> failed: <why>``, the line dglrun ends with (and the pod's termination message).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from launcher import partitions as parts
from launcher.chunked import ChunkedError
from launcher.hostfile import HostfileError
from launcher.memplan import PlanError, Step
from launcher.progress import NoProgress, Progress
from launcher.remote import peak_mb
from launcher.transfer import TransferError
from launcher.transport import TransportError

TOTAL = 5


class PhaseError(RuntimeError):
    """A phase failed; ``str()`` is the one line a user sees."""


# Failures outside any phase (reading the hostfile, setting up a transport, fetching the
# results) are reported the same way as a phase's: one line, no traceback.
USER_ERRORS = (
    PhaseError,
    TransportError,
    parts.PartitionError,
    HostfileError,
    ChunkedError,
    TransferError,
    PlanError,
    OSError,
)


@dataclass
class Report:
    """What the summary line prints."""

    seconds: dict[str, float] = field(default_factory=dict)
    dispatch_bytes: int = 0
    metrics: dict[str, object] = field(default_factory=dict)
    partition: dict[str, object] = field(default_factory=dict)  # the ParMETIS modes' figures
    memory: list[Step] = field(default_factory=list)  # the memory plan's steps


class Console:
    """Serialised output: progress lines from dglrun, prefixed lines from processes."""

    def __init__(
        self, write: Callable[[str], None] | None = None, progress: Progress | None = None
    ) -> None:
        self._write = write or (lambda s: print(s, flush=True))
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}
        self._peaks: dict[str, float] = {}
        self.progress: Progress = progress or NoProgress()

    def say(self, text: str) -> None:
        with self._lock:
            self._write(text)

    def line(self, label: str, text: str) -> None:
        peak = peak_mb(text)
        with self._lock:
            if peak is None:
                self._last[label] = text
            else:  # launcher.remote's own last word: not what the process said
                self._peaks[label] = peak
        self.say(f"[{label}] {text}")
        self.progress.output(label, text)

    def last_line(self, label: str) -> str:
        """The last line a process labelled ``label`` printed ("" if none; launcher.remote's
        peak memory line does not count)."""
        with self._lock:
            return self._last.get(label, "")

    def peaks(self) -> dict[str, float]:
        """``label -> MiB``: the peak memory of each process that ran under launcher.remote
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
    except USER_ERRORS as e:
        raise PhaseError(f"{name} failed: {e}") from e
    took = time.monotonic() - started
    report.seconds[name] = took
    console.say(f"[{k}/{TOTAL}] {name} done in {took:.1f}s")


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
