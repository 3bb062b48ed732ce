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

from chunkedgraph.job import PartitionJob, count_dir
from launcher import checkpoints, jsonfile, programs
from launcher.console import NORMAL, WARNING, Console, PhaseError, Report
from launcher.partition import output as parts
from launcher.partition.output import WORKLOAD
from launcher.partition.request import PartitionRequest
from launcher.storage import record
from launcher.storage.cache import (
    KEEP_COUNTS,
    Cache,
    CacheError,
    Lookup,
    UnsafeIndex,
    files_of,
    for_count,
    inputs,
    key_of,
)
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
    """Phase 1's work with the cache around it (call inside the phase): the run's recorded
    partitions for this count, else the cached partitions of the same inputs when whole, else
    ``partition_into(folder)``, the new set (and the other counts distpart wrote beside it,
    ``job.counts``) then cached and recorded (without storage: into the request's
    ``<workspace>/dataset``)."""
    if storage is None or (what.mode == DGL_API and not what.entry.script):
        return Partitioned(partition_into(what.workspace / "dataset"), {})
    cache = Cache(storage.partitions, storage.cache_limit)
    job = what.job
    mine = _recorded(storage, cache, job, console)
    if mine is not None:
        key, found = mine
        where = _where(storage, cache.entry(key))
        how = f"this run's {job.num_parts} partitions, key {key}; every file's SHA-256 verified"
        _reused(console, report, key, where, how)
        _evict(cache, key, cache.inputs_of(key) or {}, console, job)
        assert found.pset is not None
        return Partitioned(found.pset, found.files)
    try:
        doc = inputs(what, storage.run, storage.share_partitions)
    except CacheError as e:
        raise PhaseError(str(e)) from e
    key = key_of(doc)
    where = _where(storage, cache.entry(key))
    if storage.share_partitions and "run" in doc:
        console.say(
            "  warning: --share-partitions: name the graph the partition entry point reads with "
            "--partition-inputs, or only this run's restarts reuse its partitions"
        )
    found = cache.lookup(key, job.graph_name, job.num_parts)
    if found.pset is not None:
        how = f"same inputs: key {key}; every file's SHA-256 verified"
        _reused(console, report, key, where, how)
        _record(storage, {job.num_parts: key}, None, console)
        _evict(cache, key, doc, console, job)
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
    keys = {job.num_parts: key}
    for count in job.every_count()[1:]:
        folder = count_dir(staging, count)
        doc_c = for_count(doc, count)
        config = folder / f"{job.graph_name}.json"
        made_c = _commit(cache, folder, config, key_of(doc_c), doc_c, count, console)
        if made_c:
            keys[count] = made_c
    _said_counts(keys, job, console)
    _record(storage, keys, None, console)
    _evict(cache, key, doc, console, job)
    console.progress.record(STATUS_PARTITIONS, {"key": key, "path": where, "reused": False})
    return Partitioned(made.pset, made.files)


def _recorded(
    storage: Storage, cache: Cache, job: PartitionJob, console: Console
) -> tuple[str, Lookup] | None:
    """The entry the run recorded for ``job.num_parts`` when it is whole: (key, its lookup);
    None when there is none (a damaged one is removed, said and forgotten)."""
    key = record.read(storage).keys.get(job.num_parts)
    if key is None:
        return None
    found = cache.lookup(key, job.graph_name, job.num_parts)
    if found.pset is None:
        record.forget(storage, job.num_parts)
        if found.problem:
            _damaged(console, found.problem)
        return None
    return key, found


def _commit(
    cache: Cache,
    folder: Path,
    config: Path,
    key: str,
    doc: dict[str, object],
    count: int,
    console: Console,
    files: dict[str, tuple[int, str]] | None = None,
) -> str:
    """Index the ``count`` partitions written in ``folder`` (``config``: their partition JSON;
    ``files``: their sizes and SHA-256 when known) and move them into place as the entry
    ``key``: the key, or "" (a warning says why and the folder goes: the attempt with that
    count partitions)."""
    try:
        cache.commit(folder, key, doc, parts.load(config, count), files)
    except (CacheError, parts.PartitionError) as e:
        console.say(f"  warning: the partitions for {count} workers were not cached: {e}")
        shutil.rmtree(folder, ignore_errors=True)
        return ""
    return key


def _said_counts(keys: dict[int, str], job: PartitionJob, console: Console) -> None:
    others = sorted(c for c in keys if c != job.num_parts)
    if others:
        console.say(
            f"  cached the partitions for {', '.join(map(str, others))} workers too (the same "
            "partitioning, grouped into each count): an attempt with that many workers "
            "partitions nothing"
        )


def _record(
    storage: Storage, keys: dict[int, str], size: dict[str, int] | None, console: Console
) -> None:
    """The run's record of its partitions (launcher/storage/record.py): best effort."""
    problem = record.write(storage, keys, size)
    if problem:
        console.say(f"  warning: {problem}: a later attempt looks its partitions up as usual")


def _reused(console: Console, report: Report, key: str, where: str, how: str) -> None:
    """A cached set used as is: said, in the status and as an Event ``PartitionsReused``."""
    text = f"reused the partitions cached at {where} ({how}): the graph was not partitioned again"
    console.say(f"  {text}")
    console.progress.record(STATUS_PARTITIONS, {"key": key, "path": where, "reused": True})
    console.progress.event(NORMAL, "PartitionsReused", text[0].upper() + text[1:])
    report.partition["reused"] = where


def _damaged(console: Console, why: str) -> None:
    """An entry that could not be used (it has been removed): a warning and an Event."""
    text = f"the cached partitions are damaged: {why}; partitioning again"
    console.say(f"  warning: {text}")
    console.progress.event(WARNING, "PartitionCacheDamaged", text[0].upper() + text[1:])


def _evict(
    cache: Cache, key: str, doc: dict[str, object], console: Console, job: PartitionJob
) -> None:
    """The same graph's partition sets of other counts beyond the newest few (cache.py's
    KEEP_COUNTS, or every count of an elastic job's range), then the least recently used of
    every graph's while the cache is over its limit (:meth:`Cache.bound`), removed: said,
    never an error."""
    for line in cache.evict(key, doc, keep=max(KEEP_COUNTS, len(job.every_count()))):
        console.say(f"  removed cached partitions {line}")
    for line in cache.bound(key):
        console.say(f"  {line}")


@dataclass
class DistCache:
    """The cache in DistParMETIS, where each worker holds its own part on its own disk: the
    key covers the chunks every rank reads (each worker hashed its own); a hit copies part i
    from the entry into worker i (each file checked on the way: ``launcher.storage.cache
    place``), a miss partitions and then each worker copies its parts into a staging entry
    (``put``; the other counts' too, from ``workload@<count>``) which the launcher indexes and
    moves into place. :meth:`recorded`: the entry the run recorded for this count, found
    without the chunks."""

    cache: Cache
    key: str
    doc: dict[str, object]
    where: str
    job: PartitionJob
    storage: Storage
    python: str  # the workers' interpreter
    timeout: float  # seconds per worker's copy (0: an hour)
    mine: bool = False  # the run's recorded entry (record.py), not one found by its inputs

    @property
    def config(self) -> str:
        """The partition JSON's name."""
        return f"{self.job.graph_name}.json"

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
        return DistCache._of(storage, what, key_of(doc), doc)

    @staticmethod
    def recorded(
        storage: Storage | None, what: PartitionRequest
    ) -> tuple[DistCache, dict[str, int]] | None:
        """The entry the run recorded for this count, and the graph's sizes recorded with it
        (launcher/storage/record.py); None without one, or when its index is gone (the record
        then forgets it)."""
        if storage is None:
            return None
        had = record.read(storage)
        key = had.keys.get(what.job.num_parts)
        if key is None:
            return None
        cache = Cache(storage.partitions, storage.cache_limit)
        doc = cache.inputs_of(key)
        if doc is None:
            record.forget(storage, what.job.num_parts)
            return None
        return DistCache._of(storage, what, key, doc, cache, mine=True), had.size

    @staticmethod
    def _of(
        storage: Storage,
        what: PartitionRequest,
        key: str,
        doc: dict[str, object],
        cache: Cache | None = None,
        mine: bool = False,
    ) -> DistCache:
        cache = cache or Cache(storage.partitions, storage.cache_limit)
        where = _where(storage, cache.entry(key))
        return DistCache(cache, key, doc, where, what.job, storage, what.python, what.timeout, mine)

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

    def _dropped(self, console: Console, why: str) -> bool:
        """The entry is unusable: removed, said (an Event), forgotten by the run's record."""
        _damaged(console, self.cache.drop(self.key, why))
        if self.mine:
            record.forget(self.storage, self.job.num_parts)
        return False

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
            return self._dropped(console, str(e))
        if listed is None:
            console.say(f"  no cached partitions for these inputs (key {self.key}): partitioning")
            return False
        entry = str(self.cache.entry(self.key))

        def argv(i: int, host: Host) -> list[str]:
            dest = f"{transport.workspace(host)}/{WORKLOAD}"
            return [*programs.argv(self.python, programs.CACHE), "place", entry, dest,
                    "--config", self.config, "--part", str(i)]  # fmt: skip

        bad = [(h, line) for h, code, line in self._run(transport, hosts, argv) if code]
        if bad:
            host, line = bad[0]
            return self._dropped(console, f"{host.name}: {line.removeprefix('partition_cache: ')}")
        whose = f"this run's {self.job.num_parts} partitions" if self.mine else "same inputs"
        how = (
            f"{whose}: key {self.key}; every worker copied its own part, every file's SHA-256 "
            "verified"
        )
        _reused(console, report, self.key, self.where, how)
        _record(self.storage, {self.job.num_parts: self.key}, None, console)
        _evict(self.cache, self.key, self.doc, console, self.job)
        return True

    def store(
        self,
        transport: Transport,
        hosts: list[Host],
        console: Console,
        size: dict[str, int] | None = None,
    ) -> None:
        """Each worker's new parts into the cache, of every count distpart wrote (best
        effort: training does not depend on it; a failure is a warning and the attempt with
        that count partitions again), and the run's record of them with the graph's ``size``."""
        key = self._store(transport, hosts, self.job.num_parts, self.key, self.doc, console)
        if not key:
            return
        console.say(
            f"  cached at {self.where} for the restarts of this job"
            + (" and any job with the same inputs" if "run" not in self.doc else "")
        )
        keys = {self.job.num_parts: key}
        for count in self.job.every_count()[1:]:
            doc = for_count(self.doc, count)
            made = self._store(transport, hosts, count, key_of(doc), doc, console)
            if made:
                keys[count] = made
        _said_counts(keys, self.job, console)
        _record(self.storage, keys, size, console)
        _evict(self.cache, self.key, self.doc, console, self.job)
        console.progress.record(
            STATUS_PARTITIONS, {"key": self.key, "path": self.where, "reused": False}
        )

    def _store(
        self,
        transport: Transport,
        hosts: list[Host],
        count: int,
        key: str,
        doc: dict[str, object],
        console: Console,
    ) -> str:
        """The ``count`` parts the workers hold (worker i: parts p with p % workers == i, in
        ``workload``, or ``workload@<count>`` for another count) into a new entry ``key``:
        the key, or "" (said)."""
        what = f"the partitions for {count} workers"
        try:
            staging = self.cache.staging(key)
        except CacheError as e:
            console.say(f"  warning: {what} were not cached: {e}")
            return ""
        n = len(hosts)
        holders = [(i, h) for i, h in enumerate(hosts) if i < count]
        folder = Path(WORKLOAD)
        if count != self.job.num_parts:
            folder = count_dir(folder, count)

        def argv(j: int, host: Host) -> list[str]:
            i = holders[j][0]
            src = f"{transport.workspace(host)}/{folder}"
            mine = [str(p) for p in range(i, count, n)]
            return [*programs.argv(self.python, programs.CACHE), "put", src, str(staging),
                    "--config", self.config, "--part", *mine]  # fmt: skip

        files: dict[str, tuple[int, str]] = {}
        for host, code, line in self._run(transport, [h for _, h in holders], argv):
            try:
                if code != 0:
                    raise jsonfile.Unreadable(line)
                files.update(files_of(jsonfile.parse(line, line[:200]), staging))
            except (jsonfile.Unreadable, UnsafeIndex):
                console.say(f"  warning: {what} were not cached: {host.name}: {line[:200]}")
                shutil.rmtree(staging, ignore_errors=True)
                return ""
        return _commit(self.cache, staging, staging / self.config, key, doc, count, console, files)


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
