"""What dglrun keeps on the job's storage (``--storage``, launcher/storage/layout.py), by phase.

* phase 1: partitions are looked up in the cache first (launcher/storage/cache.py): a whole
  entry with the same inputs is used as is and the graph is not partitioned again (the log,
  ``status.partitions`` and an Event ``PartitionsReused`` say so); a damaged one is removed
  (an Event ``PartitionCacheDamaged`` names the file) and the graph partitioned again; new
  partitions are written straight into the cache (DistParMETIS: :class:`DistCache`, each
  worker copying its own part in and out). Then the cache is trimmed: the same graph's
  other partition counts beyond the newest few, and every graph's least recently used
  entries while all of them together exceed the cache's limit (``--cache-limit``), each
  removal a line of the log.
* phase 5: every trainer gets ``$DGLRUN_CHECKPOINT_DIR`` and, when a whole checkpoint is there
  (launcher/checkpoints.py), ``$DGLRUN_RESUME_FROM`` and ``$DGLRUN_RESUME_EPOCH``
  (``status.resume``, an Event ``Resuming``); checkpoints that are not whole are reported
  (an Event ``CheckpointSkipped``). ``$DGLRUN_OUTPUT_DIR`` is the run's ``output/`` there.
* always: each dglrun's log is copied to the run's ``logs/``, and the launcher writes its
  summary (``output/dglrun.json``) whether the job succeeded or not.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from launcher import checkpoints, programs
from launcher.console import NORMAL, WARNING, Console, PhaseError, Report
from launcher.partition import output as parts
from launcher.partition.request import PartitionRequest
from launcher.storage.cache import Cache, CacheError, UnsafeIndex, inputs, key_of
from launcher.storage.layout import Storage
from launcher.workers.hostfile import Host
from launcher.workers.transport import Transport, WorkerTransportError, run_everywhere
from podcontract import DGL_API, STATUS_PARTITIONS, STATUS_RESUME

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
    storage: Storage | None,
    what: PartitionRequest,
    console: Console,
    report: Report,
    partition_into: Callable[[Path], parts.PartitionSet],
) -> Partitioned:
    """Phase 1's work with the cache around it (call inside the phase): the cached
    partitions when whole, else ``partition_into(folder)``, the new set then cached
    (without storage: into the request's ``<workspace>/dataset``)."""
    if storage is None or (what.mode == DGL_API and not what.entry.script):
        return Partitioned(partition_into(what.workspace / "dataset"), {})
    try:
        doc = inputs(what, storage.run, storage.share_partitions)
    except CacheError as e:
        raise PhaseError(str(e)) from e
    key = key_of(doc)
    cache = Cache(storage.partitions, storage.cache_limit)
    where = _where(storage, cache.entry(key))
    if storage.share_partitions and "run" in doc:
        console.say(
            "  warning: --share-partitions: name the graph the partition entry point reads with "
            "--partition-inputs, or only this run's restarts reuse its partitions"
        )
    found = cache.lookup(key, what.job.graph_name, what.job.num_parts)
    if found.pset is not None:
        text = (
            f"reused the partitions cached at {where} (same inputs: key {key}; every file's "
            "SHA-256 verified): the graph was not partitioned again"
        )
        console.say(f"  {text}")
        console.progress.record(STATUS_PARTITIONS, {"key": key, "path": where, "reused": True})
        console.progress.event(NORMAL, "PartitionsReused", text[0].upper() + text[1:])
        report.partition["reused"] = where
        _evict(cache, key, doc, console)
        return Partitioned(found.pset, found.files)
    if found.problem:
        _damaged(console, found.problem)
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
    _evict(cache, key, doc, console)
    console.progress.record(STATUS_PARTITIONS, {"key": key, "path": where, "reused": False})
    return Partitioned(made.pset, made.files)


def _damaged(console: Console, why: str) -> None:
    """An entry that could not be used (it has been removed): a warning and an Event."""
    text = f"the cached partitions are damaged: {why}; partitioning again"
    console.say(f"  warning: {text}")
    console.progress.event(WARNING, "PartitionCacheDamaged", text[0].upper() + text[1:])


def _evict(cache: Cache, key: str, doc: dict[str, object], console: Console) -> None:
    """The same graph's partition sets of other counts beyond the newest few (cache.py's
    KEEP_COUNTS), then the least recently used of every graph's while the cache is over its
    limit (:meth:`Cache.bound`), removed: said, never an error."""
    for line in cache.evict(key, doc):
        console.say(f"  removed cached partitions {line}")
    for line in cache.bound(key):
        console.say(f"  {line}")


@dataclass
class DistCache:
    """The cache in DistParMETIS, where each worker holds its own part on its own disk: the
    key covers the chunks every rank reads (each worker hashed its own); a hit copies part i
    from the entry into worker i (each file checked on the way: ``launcher.storage.cache
    place``), a miss partitions and then each worker copies its part into a staging entry
    (``put``) which the launcher indexes and moves into place."""

    cache: Cache
    key: str
    doc: dict[str, object]
    where: str
    config: str  # the partition JSON's name (<graph name>.json)
    python: str  # the workers' interpreter
    timeout: float  # seconds per worker's copy (0: an hour)

    @staticmethod
    def open(
        storage: Storage | None, what: PartitionRequest, hashes: dict[str, str]
    ) -> DistCache | None:
        """The cache of ``what``'s partitions on ``storage`` (None without), keyed by the
        ``hashes`` the workers computed; copies run with the request's interpreter and
        timeout."""
        if storage is None:
            return None
        doc = inputs(what, storage.run, storage.share_partitions, content=hashes)
        key = key_of(doc)
        cache = Cache(storage.partitions, storage.cache_limit)
        where = _where(storage, cache.entry(key))
        config = f"{what.job.graph_name}.json"
        return DistCache(cache, key, doc, where, config, what.python, what.timeout)

    def _run(
        self,
        transport: Transport,
        hosts: list[Host],
        argv_of: Callable[[int, Host], list[str]],
    ) -> list[tuple[Host, int, str]]:
        """(worker, exit code, last line) of a command run on every worker."""
        timeout = self.timeout or 3600
        out = []
        for host, result in zip(
            hosts, run_everywhere(transport, hosts, argv_of, timeout), strict=True
        ):
            if isinstance(result, WorkerTransportError):
                out.append((host, 1, str(result)))
                continue
            code, text = result
            out.append((host, code, (text.strip().splitlines() or [""])[-1]))
        return out

    def place(
        self,
        transport: Transport,
        hosts: list[Host],
        console: Console,
        report: Report,
    ) -> bool:
        """Give every worker its cached part; False (partition then) when there is none,
        or a file that does not match (the entry is then removed, and an Event says so)."""
        try:
            listed = self.cache.index(self.key)
        except UnsafeIndex as e:
            _damaged(console, self.cache.drop(self.key, str(e)))
            return False
        if listed is None:
            console.say(f"  no cached partitions for these inputs (key {self.key}): partitioning")
            return False
        entry = str(self.cache.entry(self.key))

        def argv(i: int, host: Host) -> list[str]:
            dest = f"{transport.workspace(host)}/workload"
            return [*programs.argv(self.python, programs.CACHE), "place", entry, dest,
                    "--config", self.config, "--part", str(i)]  # fmt: skip

        bad = [(h, line) for h, code, line in self._run(transport, hosts, argv) if code]
        if bad:
            host, line = bad[0]
            why = f"{host.name}: {line.removeprefix('partition_cache: ')}"
            _damaged(console, self.cache.drop(self.key, why))
            return False
        text = (
            f"reused the partitions cached at {self.where} (same inputs: key {self.key}; every "
            "worker copied its own part, every file's SHA-256 verified): the graph was not "
            "partitioned again"
        )
        console.say(f"  {text}")
        console.progress.record(
            STATUS_PARTITIONS, {"key": self.key, "path": self.where, "reused": True}
        )
        console.progress.event(NORMAL, "PartitionsReused", text[0].upper() + text[1:])
        report.partition["reused"] = self.where
        _evict(self.cache, self.key, self.doc, console)
        return True

    def store(self, transport: Transport, hosts: list[Host], console: Console) -> None:
        """Each worker's new part into the cache (best effort: training does not depend on
        it; a failure is a warning and the next restart partitions again)."""
        try:
            staging = self.cache.staging(self.key)
        except CacheError as e:
            console.say(f"  warning: the partitions were not cached: {e}")
            return

        def argv(i: int, host: Host) -> list[str]:
            src = f"{transport.workspace(host)}/workload"
            return [*programs.argv(self.python, programs.CACHE), "put", src, str(staging),
                    "--config", self.config, "--part", str(i)]  # fmt: skip

        files: dict[str, tuple[int, str]] = {}
        for host, code, line in self._run(transport, hosts, argv):
            try:
                doc = json.loads(line) if code == 0 else None
            except ValueError:
                doc = None
            if doc is None:
                console.say(f"  warning: the partitions were not cached: {host.name}: {line}")
                shutil.rmtree(staging, ignore_errors=True)
                return
            files.update({str(k): (int(v[0]), str(v[1])) for k, v in doc["files"].items()})
        try:
            pset = parts.load(staging / self.config, len(hosts))
            self.cache.commit(staging, self.key, self.doc, pset, files)
        except (CacheError, parts.PartitionError) as e:
            console.say(f"  warning: the partitions were not cached: {e}")
            shutil.rmtree(staging, ignore_errors=True)
            return
        console.say(
            f"  cached at {self.where} for the restarts of this job"
            + (" and any job with the same inputs" if "run" not in self.doc else "")
        )
        _evict(self.cache, self.key, self.doc, console)
        console.progress.record(
            STATUS_PARTITIONS, {"key": self.key, "path": self.where, "reused": False}
        )


# -- phase 5 ------------------------------------------------------------------------------


def trainer_env(storage: Storage | None, num_epochs: int, console: Console) -> dict[str, str]:
    """What every trainer gets with storage (nothing without): where to write results,
    where to checkpoint, and what to resume from."""
    if storage is None:
        return {}
    env = {
        "DGLRUN_OUTPUT_DIR": str(storage.output),
        checkpoints.CHECKPOINT_DIR_ENV: str(storage.checkpoints),
    }
    choice = checkpoints.choose(storage.checkpoints, num_epochs)
    c = choice.resume
    then = f"resuming from {c.path.name}" if c else "training starts from epoch 0"
    for why in choice.skipped:
        console.say(f"  warning: checkpoint {why}: {then}")
        console.progress.event(WARNING, "CheckpointSkipped", f"Checkpoint {why}: {then}")
    if c is None:
        return env
    text = (
        f"resuming at epoch {c.epoch} of {num_epochs} from the checkpoint {_where(storage, c.path)}"
    )
    console.say(f"  {text}")
    console.progress.record(
        STATUS_RESUME, {"epoch": c.epoch, "checkpoint": _where(storage, c.path)}
    )
    console.progress.event(NORMAL, "Resuming", text[0].upper() + text[1:])
    env[checkpoints.RESUME_FROM_ENV] = str(c.path)
    env[checkpoints.RESUME_EPOCH_ENV] = str(c.epoch)
    return env


def results(storage: Storage | None) -> Path | None:
    """Where the trainers wrote their results, when that is on the storage."""
    return storage.output if storage else None


# -- the whole run --------------------------------------------------------------------------


def open_log(storage: Storage | None, role: str) -> IO[str] | None:
    """A file on the storage for this dglrun's log (None without storage)."""
    if storage is None:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = storage.logs / f"{role}-{socket.gethostname()}-{stamp}.log"
    try:
        return path.open("a", buffering=1)
    except OSError:
        return None


def write_summary(storage: Storage | None, report: Report, outcome: str, line: str) -> None:
    """The launcher's summary of this attempt in ``output/dglrun.json`` (best effort)."""
    if storage is None:
        return
    doc = {
        "outcome": outcome,
        "summary": line,
        "run": storage.run,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": {k: round(v, 3) for k, v in report.seconds.items()},
        "metrics": report.metrics,
        "partition": report.partition,
        "memory": {s.name: s.as_status() for s in report.memory},
    }
    path = storage.output / INDEX_NAME
    try:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        tmp.replace(path)
    except OSError as e:
        print(f"dglrun: warning: cannot write {path}: {e.strerror}", flush=True)
