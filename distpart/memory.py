"""A rank's memory, step by step: the peak resident set within each step of the pipeline.

Linux keeps a process's high-water mark of resident memory (``VmHWM`` in
``/proc/self/status``); writing ``5`` to ``/proc/self/clear_refs`` resets it to the current
resident set. :class:`Profile` resets it when a step starts and reads it when the step ends,
so each step's figure is that step's own peak, not the largest so far. The rank's peak is the
largest of them (the reset also resets ``getrusage``'s ``ru_maxrss``, which therefore no
longer is the whole run's peak).

Where ``clear_refs`` cannot be written (a read-only ``/proc``), every step reports the peak
since the process started, and :attr:`Profile.per_step` says so.
"""

from __future__ import annotations

import re
import resource
from dataclasses import dataclass, field
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK = "5"  # clear_refs: reset the peak resident set size


def _status_kib(key: str) -> float | None:
    try:
        text = STATUS.read_text()
    except OSError:
        return None
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return float(m.group(1)) if m else None


def _mib(key: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (its peak) in MiB; without /proc, the peak
    ``getrusage`` reports."""
    kib = _status_kib(key)
    return (kib if kib is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024


def resident_mib() -> float:
    """This process's resident set now."""
    return _mib("VmRSS")


def _peak_mib() -> float:
    return _mib("VmHWM")


def _reset_peak() -> bool:
    try:
        CLEAR_REFS.write_text(RESET_PEAK)
    except OSError:
        return False
    return True


@dataclass
class Profile:
    """``begin()`` before a step, ``end(name)`` after it."""

    steps: dict[str, float] = field(default_factory=dict)  # step -> its peak (MiB)
    after: dict[str, float] = field(default_factory=dict)  # step -> resident at its end
    start_mib: float = 0.0  # resident before the first step (interpreter, numpy, MPI, ...)
    per_step: bool = True  # False: each figure is the peak since the process started
    _before: float = 0.0  # the peak before the first reset

    def __post_init__(self) -> None:
        self.start_mib = resident_mib()
        self._before = _peak_mib()

    def begin(self) -> None:
        self.per_step = _reset_peak() and self.per_step

    def end(self, step: str) -> float:
        """The step's peak (a step run several times: the largest of its runs)."""
        peak = max(round(_peak_mib(), 1), self.steps.get(step, 0.0))
        self.steps[step] = peak
        self.after[step] = round(resident_mib(), 1)
        return peak

    @property
    def peak_mib(self) -> float:
        return round(max([self._before, *self.steps.values()]), 1)

    def worst_step(self) -> str:
        return max(self.steps, key=lambda s: self.steps[s]) if self.steps else ""
