"""What dglrun reports about a run: its last line, the pod's termination message, the summary
kept on the job's storage, the memory measured against the plan, the training's metrics, and
the progress's last word.

A run ends one of five ways, each with its exit code: succeeded (0, ``dglrun: done: ...``
with the figures of the :class:`~launcher.console.Report`), failed (1, ``dglrun: error:
<why>``, also the termination message the operator quotes in the job's Failed condition),
stopped at an epoch boundary for an elastic job's grow (75, RESCALE_EXIT_CODE),
interrupted (130) or terminated by a signal (128 + the signal; the termination message says
so). The launcher (not the partitioner) keeps its summary of each attempt on the storage.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from launcher.console import Console, Progress, Report, mb
from launcher.plans import memory as memplan
from launcher.report.progress import ABANDONED, FAILED
from launcher.storage import keeping
from launcher.storage.layout import Storage
from podcontract import (
    DIST_PARMETIS,
    PHASE_LAUNCHER_WORKLOAD,
    PHASE_PARTITIONER,
    PROGRESS_DONE,
    RESCALE_EXIT_CODE,
    STATUS_MEMORY,
)
from podprogram.termination import TERMINATION_LOG, write_termination_message

METRICS = "metrics.json"  # what the training entry point may write into $DGLRUN_OUTPUT_DIR


@dataclass(frozen=True)
class Ending:
    """What the end of a run depends on of dglrun's flags (built once: launcher.runs)."""

    phase: str  # the pod's part of the job (DGL_OPERATOR_PHASE_ENV; "": the launcher)
    partition_mode: str  # how the partition peaks add up
    storage: Storage | None  # where the launcher keeps its summary


def succeeded(end: Ending, console: Console, report: Report) -> int:
    if end.phase != PHASE_LAUNCHER_WORKLOAD:
        report_memory(end.partition_mode, report, console)
    line = summary(report)
    console.say(line)
    _keep_summary(end, report, "succeeded", line)
    return 0


def failed(end: Ending, console: Console, report: Report, why: str) -> int:
    console.say(f"dglrun: error: {why}")
    termination_message(why)
    _keep_summary(end, report, "failed", why)
    return 1


def rescaling(end: Ending, console: Console, report: Report, why: str) -> int:
    """An elastic attempt stopped for a grow (launcher/training/rescale.py): not a failure."""
    console.say(f"dglrun: {why}")
    termination_message(why)
    _keep_summary(end, report, "rescaling", why)
    return RESCALE_EXIT_CODE


def interrupted(end: Ending, console: Console, report: Report) -> int:
    console.say("dglrun: interrupted; stopped every process it started")
    _keep_summary(end, report, "interrupted", "")
    return 130


# SIGTERM in a launcher pod whose workers have agents: what it started there goes on
LEFT_RUNNING = (
    "the DGL processes on the workers go on for the launcher that replaces this one (their "
    "agents stop them if none comes); stopped every other process it started"
)


def terminated(
    end: Ending, console: Console, report: Report, signum: int, left_running: bool = False
) -> int:
    what = LEFT_RUNNING if left_running else "stopped every process it started"
    text = f"terminated by signal {signum}; {what}"
    console.say(f"dglrun: {text}")
    termination_message(text)
    _keep_summary(end, report, "terminated", text)
    return 128 + signum


def finish_progress(end: Ending, progress: Progress, code: int) -> None:
    """The progress's last word for a run that ended with ``code``. The partitioner's end is
    not the job's: its last phase stays until the launcher's."""
    if code == 0:
        progress.finish(None if end.phase == PHASE_PARTITIONER else PROGRESS_DONE)
    elif code in (128 + signal.SIGTERM, RESCALE_EXIT_CODE):
        progress.finish(ABANDONED)  # (the operator clears the progress for the next attempt)
    else:
        progress.finish(FAILED)


def summary(report: Report) -> str:
    bits = []
    if "partition" in report.seconds:
        bits.append(f"partition {report.seconds['partition']:.1f}s")
    if report.partition.get("edge_cut") is not None:
        bits.append(f"edge cut {report.partition['edge_cut']}")
    if "dispatch" in report.seconds and report.dispatch_bytes:  # (DistParMETIS copies nothing)
        bits.append(f"dispatch {mb(report.dispatch_bytes)} in {report.seconds['dispatch']:.1f}s")
    if "train" in report.seconds:
        bits.append(f"training {report.seconds['train']:.1f}s")
    for key in ("test_accuracy", "val_accuracy"):
        value = report.metrics.get(key)
        if isinstance(value, (int, float)):
            bits.append(f"{key.replace('_', ' ')} {value:.4f}")
    return "dglrun: done: " + ", ".join(bits)


def termination_message(text: str, path: str | Path = TERMINATION_LOG) -> None:
    """In a pod, the kubelet puts this text into the container's terminated state; the
    operator quotes it in the job's Failed condition, so the reason reaches `kubectl get`."""
    write_termination_message(text[:4000], path)


def _keep_summary(end: Ending, report: Report, outcome: str, line: str) -> None:
    """The launcher's (not the partitioner's) summary of the attempt, on the storage."""
    if end.phase != PHASE_PARTITIONER:
        keeping.write_summary(end.storage, report, outcome, line)


def read_metrics(out: Path, console: Console, report: Report) -> None:
    """The training's metrics (``metrics.json`` in its output folder), for the summary."""
    metrics = out / METRICS
    if metrics.is_file():
        try:
            report.metrics = json.loads(metrics.read_text())
        except ValueError:
            console.say(f"  warning: {metrics} is not valid JSON")


def measured_peaks(partition_mode: str, report: Report, console: Console) -> dict[str, float]:
    """Each step's measured peak (MiB) for one pod: the partition entry point, or the ranks of
    one pod together; for ``train``, the largest worker pod's.

    A worker pod's train peak is the largest memory sample its servers and trainers gave
    (the pod's anonymous and shared memory: what it cannot give back). Where none was taken
    (dglrun's local transport, or samples off), it is their peak resident memory added up,
    which counts the graph they share in memory (and the feature files they map) once per
    process: above what the pod held."""
    out: dict[str, float] = {}
    per_rank = report.partition.get("peak_rss_mb_per_rank")
    ranks = [float(x) for x in per_rank] if isinstance(per_rank, list) else []
    if ranks:
        out["partition"] = max(ranks) if partition_mode == DIST_PARMETIS else sum(ranks)
    added = _per_worker(console.peaks(), lambda a, b: a + b)
    sampled = _per_worker(console.sampled_peaks(), max)
    if added:
        out["train"] = max(sampled.get(worker, mib) for worker, mib in added.items())
    return out


def _per_worker(
    by_label: dict[str, float], combine: Callable[[float, float], float]
) -> dict[str, float]:
    """``worker -> MiB`` of the figures of its servers and trainers (``worker-0/server-0``)."""
    out: dict[str, float] = {}
    for label, mib in by_label.items():
        worker, _, proc = label.partition("/")
        if proc.startswith(("server-", "trainer-")):
            out[worker] = combine(out[worker], mib) if worker in out else mib
    return out


def report_memory(partition_mode: str, report: Report, console: Console) -> None:
    """The plan next to what was measured, in the log and in ``status.memory``."""
    peaks = measured_peaks(partition_mode, report, console)
    if report.memory:
        console.say(memplan.table(report.memory, peaks))
    if report.memory or peaks:
        console.progress.record(STATUS_MEMORY, memplan.status(report.memory, peaks))
