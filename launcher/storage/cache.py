"""Partitions kept on the job's storage and reused when nothing they were made from changed.

The key is the SHA-256 of every input of the partition phase (:func:`inputs`): this cache's
format, the partition mode, graph name, number of partitions, balance flags and partition
arguments, and the *content* of the partition entry point (DGL-API), of the chunked graph's
metadata and chunk files (the ParMETIS modes), and of the files named by
``--partition-inputs`` (DGL-API: the graph the entry point reads, which dglrun cannot see
otherwise). Where the key does not cover the graph itself (DGL-API without
``--partition-inputs``) it also holds the run's name: then only the restarts of one job reuse
its partitions (same image, same graph); ``--share-partitions`` (``spec.storage.
sharePartitions``) lets any job on the same storage reuse an entry with the same key.

An entry is ``<cache>/<key>/``: the partition set as written (its config and part folders)
and its index ``.dglrun-cache.json`` = ``{"key", "inputs", "files": {rel: [size, sha256]}}``,
written last. It is built in ``<cache>/.staging-<key>-<random>/`` and renamed into place, so a
half-written entry is never taken. :meth:`Cache.lookup` checks every file's size and SHA-256
against the index first; a mismatch removes the entry and says which file, and the graph is
partitioned again.

Eviction, each time an entry is used or made (:meth:`Cache.evict`, then :meth:`Cache.bound`):
an entry's index's mtime is when a job last used it. Of one graph (the same inputs but for the
number of partitions) the :data:`KEEP_COUNTS` most recently used stay. Over every graph, the
entries together stay within the cache's limit (``--cache-limit``, ``spec.storage.cacheLimit``;
by default :data:`DEFAULT_LIMIT_SHARE` of the filesystem the cache is on): the least recently
used go first, never the entry in use. Sizes are the indexes' (a walk of the entry only where
its index does not list them); ``.staging-`` folders (entries another job is writing) are
neither counted nor touched, nor is an entry whose index cannot be read.

An index is read bounded (launcher/jsonfile.py: its size, its nesting depth, an object): one
that is too large, too deep, not JSON or of another shape (a ``files`` that is not an object of
``[size, sha256]`` pairs) is no entry: the lookup removes it and says which file, and the graph
is partitioned again; the eviction neither counts nor removes it.

Standard library only (dglrun's layer).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from launcher import checksums, jsonfile, programs
from launcher.errors import LauncherError
from launcher.partition import output as parts
from launcher.partition.request import PartitionRequest
from podcontract import DGL_API

FORMAT = 1  # bump when what an entry holds changes: older entries then miss
# partition sets kept of one graph (the same inputs but for the number of partitions: an
# elastic job's counts); beyond it the least recently used go (see Cache.evict)
KEEP_COUNTS = 3
# without a limit given (--cache-limit, spec.storage.cacheLimit), the share of the filesystem
# the cache is on that every graph's entries together may fill: the claim also holds the runs'
# checkpoints, models and logs (and, on a block volume, the filesystem is the claim)
DEFAULT_LIMIT_SHARE = 0.5
INDEX = ".dglrun-cache.json"  # (a dot file: no graph name can collide with it)
STAGING = ".staging-"


class CacheError(LauncherError, RuntimeError):
    """The cache cannot be read or written; ``str()`` names the path."""


class UnsafeIndex(CacheError, ValueError):
    """An entry's index names a file outside the entry (absolute, ``..``): whoever wrote it
    is not dglrun, and nothing it names is read or written."""


def files_of(doc: object, index: Path) -> dict[str, tuple[int, str]]:
    """An index's files (relative path -> size, sha256), every name checked to stay inside
    its entry (:class:`UnsafeIndex` names the first that does not); ``ValueError`` naming the
    index when it is not an object whose ``files`` maps names to ``[size, sha256]``."""
    listed = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(listed, dict):
        raise jsonfile.Unreadable(f"{index} has no object 'files'")
    files = {}
    for k, v in listed.items():
        ok = isinstance(v, list) and len(v) == 2 and type(v[0]) is int and v[0] >= 0
        if not (ok and isinstance(v[1], str)):
            raise jsonfile.Unreadable(f"{index}: file {k[:200]!r} is not listed as [size, sha256]")
        files[k] = (v[0], v[1])
    for rel in files:
        why = checksums.outside(rel)
        if why is not None:
            raise UnsafeIndex(f"{index} names {rel!r}, {why}: refused (nothing copied)")
    return files


def _tree_hash(path: Path) -> str:
    """SHA-256 over a file, or a folder's files by relative path (content, not dates)."""
    if path.is_file():
        return checksums.file_sha256(path)
    if not path.is_dir():
        raise CacheError(f"--partition-inputs {path} does not exist")
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path).as_posix()}\0{checksums.file_sha256(f)}\n".encode())
    return h.hexdigest()


def inputs(
    what: PartitionRequest, run: str, share: bool, content: dict[str, str] | None = None
) -> dict[str, object]:
    """What the partitions are made from, as the key's hash covers it (readable: it is
    kept in the entry's index): the request's mode, job and entry point (not how or where
    it runs). ``content``: the graph files' SHA-256 when computed elsewhere (DistParMETIS:
    by each worker, over the chunks its rank reads)."""
    job, entry = what.job, what.entry
    doc: dict[str, object] = {
        "format": FORMAT,
        "mode": what.mode,
        "graph_name": job.graph_name,
        "num_partitions": job.num_parts,
        "balance_train": job.balance_train,
        "balance_edges": job.balance_edges,
        "partitioner": job.partitioner if what.mode != DGL_API else None,
        "partition_args": list(entry.args),
        "dataset_url": entry.dataset_url,
    }
    if content is None:
        content = {}
        if what.mode == DGL_API:
            assert entry.script is not None
            content[entry.script] = _tree_hash(Path(entry.script))
            for named in entry.inputs:
                content[named] = _tree_hash(Path(named))
        else:
            from chunkedgraph import ChunkedError, content_hashes, load

            assert job.chunked is not None
            try:
                content = content_hashes(load(job.chunked))
            except ChunkedError as e:
                raise CacheError(str(e)) from e
    if job.feature_files:  # (absent otherwise: the entries cached before it keep their keys)
        doc["feature_files"] = True
    if job.seed:  # (the same: absent at the default)
        doc["seed"] = job.seed
    doc["content"] = dict(sorted(content.items()))
    graph_known = what.mode != DGL_API or bool(entry.inputs)
    if not (share and graph_known):
        doc["run"] = run  # the graph is the job's own: only its restarts share the entry
    return doc


def key_of(doc: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def for_count(doc: dict[str, object], count: int) -> dict[str, object]:
    """The inputs ``doc`` for another number of partitions (an elastic job's other counts,
    made by the same partitioning)."""
    return {**doc, "num_partitions": count}


def family_of(doc: dict[str, object]) -> str:
    """The key of everything but the number of partitions: one graph, any count."""
    return key_of({k: v for k, v in doc.items() if k != "num_partitions"})


def amount(n: float) -> str:
    """Bytes for a person: ``512 B``, ``3.0 KiB``, ``12.5 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def filesystem_size(path: Path) -> int | None:
    """The size in bytes of the filesystem ``path`` is on (on a block volume: the claim's;
    on a share without per-claim quotas, e.g. NFS: the whole export's), or None when it cannot
    be read."""
    try:
        fs = os.statvfs(path)
    except OSError:
        return None
    return fs.f_blocks * fs.f_frsize


@dataclass(frozen=True)
class Held:
    """A committed entry as the eviction across graphs sees it."""

    key: str  # its folder's name
    used: float  # its index's mtime: when a job last used it
    size: int  # bytes: its files' as its index lists them, with the index
    graph: str  # the graph's name and partition count, for the log (``?``: unknown)
    count: int | str

    def describe(self) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.used))
        return (
            f"{self.key} (graph {self.graph}, {self.count} partitions, {amount(self.size)}, "
            f"last used {stamp})"
        )


def _walk_size(entry: Path) -> int:
    """The bytes of the files under ``entry`` (links not followed; unreadable ones skipped)."""
    total = 0
    for top, _, names in os.walk(entry, followlinks=False):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_size
    return total


def _held(entry: Path) -> Held | None:
    """``entry`` as :class:`Held`, or None when its index cannot be read (missing, not a JSON
    object): such an entry is neither counted nor removed here (:meth:`Cache.lookup` removes
    it when a job looks it up). The size comes from the index's ``files``; from a walk of the
    entry where those are not sizes."""
    index = entry / INDEX
    doc = jsonfile.entry(index)
    if not isinstance(doc, dict):
        return None
    try:
        stat = index.stat()
    except OSError:
        return None
    try:
        sizes = [size for size, _ in files_of(doc, index).values()]
        if any(size < 0 for size in sizes):
            raise ValueError("a negative size")
        size = sum(sizes) + stat.st_size
    except (UnsafeIndex, KeyError, TypeError, ValueError, IndexError, AttributeError):
        size = _walk_size(entry)
    inputs = doc.get("inputs")
    inputs = inputs if isinstance(inputs, dict) else {}
    graph = inputs.get("graph_name")
    count = inputs.get("num_partitions")
    graph = graph if isinstance(graph, str) else "?"
    return Held(entry.name, stat.st_mtime, size, graph, count if isinstance(count, int) else "?")


def held(root: Path) -> list[Held]:
    """Every committed entry under ``root`` whose index can be read, by name: not the
    folders whose name starts with a dot (``.staging-``: being written by a job; ``.bad-``:
    being removed)."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    found = (_held(root / name) for name in names if not name.startswith("."))
    return [h for h in found if h is not None]


def over_limit(entries: Sequence[Held], key: str, limit: int) -> list[Held]:
    """The entries to remove for ``entries`` to add up to at most ``limit`` bytes: the least
    recently used first (the older ``used``; ties by key), never ``key`` (the entry in use);
    none when they are within it. When ``key`` alone is over, every other entry."""
    total = sum(e.size for e in entries)
    out = []
    for e in sorted((e for e in entries if e.key != key), key=lambda e: (e.used, e.key)):
        if total <= limit:
            break
        out.append(e)
        total -= e.size
    return out


@dataclass
class Lookup:
    """An entry found whole (``pset`` and its files' ``(size, sha256)``), or why not."""

    pset: parts.PartitionSet | None = None
    files: dict[str, tuple[int, str]] = field(default_factory=dict)
    problem: str = ""  # why an entry that exists was not used (it has been removed)


class Cache:
    """The entries under ``root``; ``limit``: the bytes every graph's entries together may
    hold (None: :data:`DEFAULT_LIMIT_SHARE` of the filesystem ``root`` is on)."""

    def __init__(self, root: Path, limit: int | None = None) -> None:
        self.root = root
        self.limit = limit

    def entry(self, key: str) -> Path:
        return self.root / key

    def lookup(self, key: str, graph_name: str, num_parts: int) -> Lookup:
        """The entry ``key`` when whole (every file checked against its index), else why not
        (a damaged entry is removed). It is marked used first (its index's mtime): another
        job's eviction (:meth:`bound`) meanwhile takes it last."""
        entry = self.entry(key)
        index = entry / INDEX
        if not index.is_file():
            return Lookup()
        with contextlib.suppress(OSError):
            os.utime(index)
        try:
            want = files_of(jsonfile.read(index), index)
        except (UnsafeIndex, jsonfile.Unreadable) as e:
            return Lookup(problem=self._drop(entry, str(e)))
        except OSError as e:
            return Lookup(problem=self._drop(entry, f"{index} is unreadable ({e})"))
        linked = checksums.links(entry)
        if linked:
            why = f"{entry}/{linked[0]} is a symbolic link (a cache entry holds files only)"
            return Lookup(problem=self._drop(entry, why))
        got = checksums.manifest(entry)
        got.pop(INDEX, None)
        for rel, (size, digest) in sorted(want.items()):
            have = got.get(rel)
            if have is None:
                return Lookup(problem=self._drop(entry, f"{entry}/{rel} is missing"))
            if have != (size, digest):
                why = f"{entry}/{rel} does not match its SHA-256 in {INDEX}"
                if have[0] != size:
                    why += f" ({have[0]} bytes, {size} expected)"
                return Lookup(problem=self._drop(entry, why))
        try:
            config = parts.find_config(entry, graph_name)
            pset = parts.load(config, num_parts)
        except parts.PartitionError as e:
            return Lookup(problem=self._drop(entry, str(e)))
        return Lookup(pset, {k: v for k, v in got.items() if k in want})

    def staging(self, key: str) -> Path:
        """A new empty folder to partition into (an earlier attempt's leftovers removed)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for old in self.root.glob(f"{STAGING}{key}-*"):
                shutil.rmtree(old, ignore_errors=True)
            path = self.root / f"{STAGING}{key}-{secrets.token_hex(4)}"
            path.mkdir()
        except OSError as e:
            raise CacheError(f"cannot make a folder in {self.root}: {e.strerror}") from e
        return path

    def index(self, key: str) -> dict[str, tuple[int, str]] | None:
        """The files of a committed entry as its index lists them (their contents not
        checked), or None; :class:`UnsafeIndex` for an index naming a file outside it."""
        path = self.entry(key) / INDEX
        try:
            return files_of(jsonfile.read(path), path)
        except UnsafeIndex:
            raise
        except jsonfile.Unreadable as e:
            print(f"dglrun: warning: {e}; taken as no entry", flush=True)
            return None
        except OSError:
            return None

    def inputs_of(self, key: str) -> dict[str, object] | None:
        """What a committed entry was made from (its index's ``inputs``), or None."""
        doc = jsonfile.entry(self.entry(key) / INDEX)
        inputs = doc.get("inputs") if isinstance(doc, dict) else None
        return inputs if isinstance(inputs, dict) else None

    def drop(self, key: str, why: str) -> str:
        return self._drop(self.entry(key), why)

    def evict(self, key: str, doc: dict[str, object], keep: int = KEEP_COUNTS) -> list[str]:
        """Mark ``key`` used now (its index's mtime), then keep of its graph's entries (same
        :func:`family_of`) the ``keep`` most recently used, ``key`` among them; the others are
        removed. Returns what went, one line each. Best effort: an entry that cannot be read or
        removed stays."""
        family = family_of(doc)
        with contextlib.suppress(OSError):
            os.utime(self.entry(key) / INDEX)
        found: list[tuple[float, Path, object]] = []
        try:
            names = sorted(os.listdir(self.root))
        except OSError:
            return []
        for name in names:
            index = self.root / name / INDEX
            if name.startswith(".") or name == key:
                continue
            kept = jsonfile.entry(index)
            try:
                used = index.stat().st_mtime
            except OSError:
                continue
            other = kept.get("inputs") if isinstance(kept, dict) else None
            if isinstance(other, dict) and family_of(other) == family:
                found.append((used, self.root / name, other.get("num_partitions")))
        found.sort(key=lambda f: f[0], reverse=True)
        gone = []
        for _, entry, count in found[max(keep - 1, 0) :]:
            gone.append(
                self._drop(entry, f"{entry.name} ({count} partitions): the least recently used")
            )
        return gone

    def bound(self, key: str) -> list[str]:
        """Keep every graph's entries together within the cache's limit: the least recently
        used go first (:func:`over_limit`), until the total is within it; ``key``, the entry
        in use, never goes, and when it alone is over the limit it stays and one line says so.
        Call after :meth:`evict` (which marks ``key`` used). Returns what went and why, one
        line each, for the job's log. Best effort: an entry whose index cannot be read is
        neither counted nor removed; one that cannot be removed stays (a line says so)."""
        limit, whence = self.limit, "--cache-limit, spec.storage.cacheLimit"
        if limit is None:
            size = filesystem_size(self.root)
            if size is None:
                return [
                    f"warning: the partition cache {self.root} is not bounded across graphs: "
                    "the size of its filesystem cannot be read (set spec.storage.cacheLimit, "
                    "--cache-limit)"
                ]
            limit = int(size * DEFAULT_LIMIT_SHARE)
            whence = f"{DEFAULT_LIMIT_SHARE:.0%} of its filesystem's {amount(size)}"
        found = held(self.root)
        total = sum(h.size for h in found)
        lines = []
        for h in over_limit(found, key, limit):
            why = self._remove(self.entry(h.key))
            if why:
                lines.append(f"warning: cannot remove cached partitions {h.key}: {why}")
                continue
            lines.append(
                f"removed cached partitions {h.describe()}: the least recently used of every "
                f"graph's, the cache holding {amount(total)}, over its limit of {amount(limit)} "
                f"({whence})"
            )
            total -= h.size
        mine = next((h for h in found if h.key == key), None)
        if mine is not None and mine.size > limit:
            lines.append(
                f"warning: the partitions in use, {mine.describe()}, alone exceed the "
                f"partition cache's limit of {amount(limit)} ({whence}): kept"
            )
        return lines

    def commit(
        self,
        staging: Path,
        key: str,
        doc: dict[str, object],
        pset: parts.PartitionSet,
        files: dict[str, tuple[int, str]] | None = None,
    ) -> Lookup:
        """Index the partitions written in ``staging`` (``files``: their (size, sha256) if
        already known) and move them into place; if another job committed the same key
        meanwhile, that entry is used and ours removed."""
        files = checksums.manifest(staging) if files is None else files
        index = {"key": key, "inputs": doc, "files": {k: list(v) for k, v in files.items()}}
        try:
            tmp = staging / f".{INDEX}.tmp"
            tmp.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, staging / INDEX)
        except OSError as e:
            raise CacheError(f"cannot write {staging / INDEX}: {e.strerror}") from e
        entry = self.entry(key)
        try:
            os.rename(staging, entry)
        except OSError:  # (an entry of that key appeared: the same inputs, made elsewhere)
            shutil.rmtree(staging, ignore_errors=True)
            found = self.lookup(key, pset.config.stem, pset.num_parts)
            if found.pset is None:
                raise CacheError(
                    f"cannot move the partitions into {entry}: {found.problem or 'it exists'}"
                ) from None
            return found
        moved = parts.load(entry / pset.config.relative_to(staging), pset.num_parts)
        return Lookup(moved, files)

    def _drop(self, entry: Path, why: str) -> str:
        """Remove a damaged entry (:meth:`_remove`, best effort); returns ``why``."""
        self._remove(entry)
        return why

    def _remove(self, entry: Path) -> str:
        """Remove an entry, renamed away first (no reader takes it meanwhile): "" when it is
        gone (another job's removal of it included), else why not."""
        gone = self.root / f".bad-{entry.name}-{secrets.token_hex(4)}"
        try:
            os.rename(entry, gone)
        except FileNotFoundError:
            return ""
        except OSError as e:
            return e.strerror or str(e)
        shutil.rmtree(gone, ignore_errors=True)
        return ""


# -- on the workers (DistParMETIS: each worker's part lives on its own disk) ----------------


def _copy_hashed(src: Path | BinaryIO, dst: Path) -> tuple[int, str]:
    """Copy a file (a path, or one already open), hashing it on the way: its (size,
    sha256)."""
    h = hashlib.sha256()
    size = 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        fin = stack.enter_context(src.open("rb")) if isinstance(src, Path) else src
        fout = stack.enter_context(dst.open("wb"))
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            h.update(chunk)
            fout.write(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _part_dir(config: Path, part: int) -> str:
    """The folder of one part (everything in it goes along, e.g. distpart's orig_nids)."""
    return parts.load(config, None, check_files=False).part_dir(part)


def place(entry: Path, config_name: str, part: int, dest: Path) -> dict[str, object]:
    """Copy the partition config and part ``part`` of a cache entry into ``dest``, each file
    checked against the entry's index on the way; raises CacheError naming a file that does
    not match."""
    index = Cache(entry.parent).index(entry.name)
    if index is None:
        raise CacheError(f"{entry / INDEX} is missing or unreadable")
    folder = _part_dir(entry / config_name, part)
    mine = [config_name, *sorted(k for k in index if k.startswith(f"{folder}/"))]
    total = 0
    for rel in mine:
        want = index.get(rel)
        if want is None:
            raise CacheError(f"{entry}/{rel} is not in {INDEX}")
        try:
            with checksums.open_inside(entry, rel) as src:
                got = _copy_hashed(src, dest / rel)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                why = "a symbolic link on the way (a cache entry holds files only)"
                raise CacheError(f"cannot copy {entry}/{rel}: {why}") from e
            raise CacheError(f"cannot copy {entry}/{rel}: {e.strerror}") from e
        if got != want:
            (dest / rel).unlink(missing_ok=True)
            raise CacheError(f"{entry}/{rel} does not match its SHA-256 in {INDEX}")
        total += got[0]
    return {"bytes": total}


def put(src: Path, config_name: str, parts_: Sequence[int], staging: Path) -> dict[str, object]:
    """Copy the parts ``parts_`` (and the partition config) from ``src`` into ``staging``; the
    files copied, by relative path, with their (size, sha256)."""
    files = {}
    for part in parts_:
        folder = _part_dir(src / config_name, part)
        inside = sorted(
            f.relative_to(src).as_posix() for f in (src / folder).rglob("*") if f.is_file()
        )
        for rel in [config_name, *inside]:
            try:
                files[rel] = _copy_hashed(src / rel, staging / rel)
            except OSError as e:
                raise CacheError(f"cannot copy {src}/{rel} into {staging}: {e.strerror}") from e
    return {"files": files}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=programs.prog(programs.CACHE))
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, what in (("place", "an entry's part into a worker"), ("put", "a part into staging")):
        c = sub.add_parser(name, help=f"copy {what}, checksummed")
        c.add_argument(
            "src", type=Path, help="the cache entry (place) or the worker's folder (put)"
        )
        c.add_argument("dest", type=Path, help="the worker's folder (place) or staging (put)")
        c.add_argument("--config", required=True, help="the partition config's file name")
        c.add_argument(
            "--part", type=int, nargs="+", required=True, help="the part (put: or parts)"
        )
    a = p.parse_args(argv)
    try:
        if a.cmd == "place":
            if len(a.part) != 1:
                p.error("place: one --part")
            doc = place(a.src, a.config, a.part[0], a.dest)
        else:
            doc = put(a.src, a.config, a.part, a.dest)
    except (CacheError, parts.PartitionError) as e:
        print(f"partition_cache: {e}")
        return 1
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
