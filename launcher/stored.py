"""What dglrun keeps on the job's storage (``--storage``, launcher/storage.py), by phase.

* phase 1: partitions are looked up in the cache first (launcher/partition_cache.py): a whole
  entry with the same inputs is used as is and the graph is not partitioned again (the log,
  ``status.partitions`` and an Event ``PartitionsReused`` say so); a damaged one is removed
  (an Event ``PartitionCacheDamaged`` names the file) and the graph partitioned again; new
  partitions are written straight into the cache.
* phase 5: every trainer gets ``$DGLRUN_CHECKPOINT_DIR`` and, when a whole checkpoint is there
  (launcher/checkpoints.py), ``$DGLRUN_RESUME_FROM`` and ``$DGLRUN_RESUME_EPOCH``
  (``status.resume``, an Event ``Resuming``); checkpoints that are not whole are reported
  (an Event ``CheckpointSkipped``). ``$DGLRUN_OUTPUT_DIR`` is the run's ``output/`` there.
* always: each dglrun's log is copied to the run's ``logs/``, and the launcher writes its
  summary (``output/dglrun.json``) whether the job succeeded or not.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from launcher import checkpoints
from launcher import partitions as parts
from launcher.cli import DGL_API, Options
from launcher.console import Console, PhaseError, Report
from launcher.partition_cache import Cache, CacheError, inputs, key_of
from launcher.progress import NORMAL, WARNING
from launcher.storage import Storage

INDEX_NAME = "dglrun.json"


def _where(storage: Storage, path: Path) -> str:
    """``path`` as seen from the storage's root (what status and events show)."""
    try:
        return path.relative_to(storage.root).as_posix()
    except ValueError:
        return str(path)


# -- phase 1 ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Partitioned:
    pset: parts.PartitionSet
    files: dict[str, tuple[int, str]]  # (size, sha256) of the set's files, when known


def partition_cached(
    opts: Options,
    console: Console,
    report: Report,
    partition_into: Callable[[Path], parts.PartitionSet],
) -> Partitioned:
    """Phase 1's work with the cache around it (call inside the phase): the cached
    partitions when whole, else ``partition_into(folder)``, the new set then cached."""
    storage = opts.storage
    if storage is None or (opts.partition_mode == DGL_API and not opts.partition_entry_point):
        return Partitioned(partition_into(opts.workspace / "dataset"), {})
    try:
        doc = inputs(opts, storage.run, storage.share_partitions)
    except CacheError as e:
        raise PhaseError(str(e)) from e
    key = key_of(doc)
    cache = Cache(storage.partitions)
    where = _where(storage, cache.entry(key))
    if storage.share_partitions and "run" in doc:
        console.say(
            "  warning: --share-partitions: name the graph the partition entry point reads with "
            "--partition-inputs, or only this run's restarts reuse its partitions"
        )
    found = cache.lookup(key, opts.graph_name, opts.num_partitions)
    if found.pset is not None:
        text = (
            f"reused the partitions cached at {where} (same inputs: key {key}; every file's "
            "SHA-256 verified): the graph was not partitioned again"
        )
        console.say(f"  {text}")
        console.progress.record("partitions", {"key": key, "path": where, "reused": True})
        console.progress.event(NORMAL, "PartitionsReused", text[0].upper() + text[1:])
        report.partition["reused"] = where
        return Partitioned(found.pset, found.files)
    if found.problem:
        text = f"the cached partitions are damaged: {found.problem}; partitioning again"
        console.say(f"  warning: {text}")
        console.progress.event(WARNING, "PartitionCacheDamaged", text[0].upper() + text[1:])
    else:
        console.say(f"  no cached partitions for these inputs (key {key}): partitioning")
    try:
        staging = cache.staging(key)
        made = cache.commit(staging, key, doc, partition_into(staging))
    except CacheError as e:
        raise PhaseError(str(e)) from e
    assert made.pset is not None
    console.say(
        f"  cached at {where} for the restarts of this job"
        + (" and any job with the same inputs" if "run" not in doc else "")
    )
    console.progress.record("partitions", {"key": key, "path": where, "reused": False})
    return Partitioned(made.pset, made.files)


# -- phase 5 ------------------------------------------------------------------------------


def trainer_env(opts: Options, console: Console) -> dict[str, str]:
    """What every trainer gets with storage (nothing without): where to write results,
    where to checkpoint, and what to resume from."""
    storage = opts.storage
    if storage is None:
        return {}
    env = {
        "DGLRUN_OUTPUT_DIR": str(storage.output),
        checkpoints.CHECKPOINT_DIR_ENV: str(storage.checkpoints),
    }
    choice = checkpoints.choose(storage.checkpoints, opts.num_epochs)
    c = choice.resume
    then = f"resuming from {c.path.name}" if c else "training starts from epoch 0"
    for why in choice.skipped:
        console.say(f"  warning: checkpoint {why}: {then}")
        console.progress.event(WARNING, "CheckpointSkipped", f"Checkpoint {why}: {then}")
    if c is None:
        return env
    text = (
        f"resuming at epoch {c.epoch} of {opts.num_epochs} from the checkpoint "
        f"{_where(storage, c.path)}"
    )
    console.say(f"  {text}")
    console.progress.record("resume", {"epoch": c.epoch, "checkpoint": _where(storage, c.path)})
    console.progress.event(NORMAL, "Resuming", text[0].upper() + text[1:])
    env[checkpoints.RESUME_FROM_ENV] = str(c.path)
    env[checkpoints.RESUME_EPOCH_ENV] = str(c.epoch)
    return env


def results(opts: Options) -> Path | None:
    """Where the trainers wrote their results, when that is on the storage."""
    return opts.storage.output if opts.storage else None


# -- the whole run --------------------------------------------------------------------------


def open_log(opts: Options, role: str) -> IO[str] | None:
    """A file on the storage for this dglrun's log (None without storage)."""
    if opts.storage is None:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = opts.storage.logs / f"{role}-{socket.gethostname()}-{stamp}.log"
    try:
        return path.open("a", buffering=1)
    except OSError:
        return None


def write_summary(opts: Options, report: Report, outcome: str, line: str) -> None:
    """The launcher's summary of this attempt in ``output/dglrun.json`` (best effort)."""
    if opts.storage is None:
        return
    doc = {
        "outcome": outcome,
        "summary": line,
        "run": opts.storage.run,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": {k: round(v, 3) for k, v in report.seconds.items()},
        "metrics": report.metrics,
        "partition": report.partition,
        "memory": {s.name: s.as_status() for s in report.memory},
    }
    path = opts.storage.output / INDEX_NAME
    try:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        tmp.replace(path)
    except OSError as e:
        print(f"dglrun: warning: cannot write {path}: {e.strerror}", flush=True)
