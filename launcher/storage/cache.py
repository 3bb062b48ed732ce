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
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from launcher import checksums, programs
from launcher.errors import LauncherError
from launcher.partition import output as parts
from launcher.partition.request import PartitionRequest
from podcontract import DGL_API

FORMAT = 1  # bump when what an entry holds changes: older entries then miss
# partition sets kept of one graph (the same inputs but for the number of partitions: an
# elastic job's counts); beyond it the least recently used go (see Cache.evict)
KEEP_COUNTS = 3
INDEX = ".dglrun-cache.json"  # (a dot file: no graph name can collide with it)
STAGING = ".staging-"


class CacheError(LauncherError, RuntimeError):
    """The cache cannot be read or written; ``str()`` names the path."""


class UnsafeIndex(CacheError, ValueError):
    """An entry's index names a file outside the entry (absolute, ``..``): whoever wrote it
    is not dglrun, and nothing it names is read or written."""


def _files(doc: object, index: Path) -> dict[str, tuple[int, str]]:
    """An index's files (relative path -> size, sha256), every name checked to stay inside
    its entry (:class:`UnsafeIndex` names the first that does not)."""
    if not isinstance(doc, dict):
        raise TypeError("not an object")
    files = {str(k): (int(v[0]), str(v[1])) for k, v in doc["files"].items()}
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
    doc["content"] = dict(sorted(content.items()))
    graph_known = what.mode != DGL_API or bool(entry.inputs)
    if not (share and graph_known):
        doc["run"] = run  # the graph is the job's own: only its restarts share the entry
    return doc


def key_of(doc: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def family_of(doc: dict[str, object]) -> str:
    """The key of everything but the number of partitions: one graph, any count."""
    return key_of({k: v for k, v in doc.items() if k != "num_partitions"})


@dataclass
class Lookup:
    """An entry found whole (``pset`` and its files' ``(size, sha256)``), or why not."""

    pset: parts.PartitionSet | None = None
    files: dict[str, tuple[int, str]] = field(default_factory=dict)
    problem: str = ""  # why an entry that exists was not used (it has been removed)


class Cache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, key: str) -> Path:
        return self.root / key

    def lookup(self, key: str, graph_name: str, num_parts: int) -> Lookup:
        entry = self.entry(key)
        index = entry / INDEX
        if not index.is_file():
            return Lookup()
        try:
            want = _files(json.loads(index.read_text()), index)
        except UnsafeIndex as e:
            return Lookup(problem=self._drop(entry, str(e)))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
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
            return _files(json.loads(path.read_text()), path)
        except UnsafeIndex:
            raise
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

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
            try:
                kept = json.loads(index.read_text())
                used = index.stat().st_mtime
            except (OSError, ValueError):
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
        """Remove a damaged entry (renamed away first: no reader takes it meanwhile)."""
        gone = self.root / f".bad-{entry.name}-{secrets.token_hex(4)}"
        with contextlib.suppress(OSError):
            os.rename(entry, gone)
            shutil.rmtree(gone, ignore_errors=True)
        return why


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


def put(src: Path, config_name: str, part: int, staging: Path) -> dict[str, object]:
    """Copy part ``part`` (and the partition config) from ``src`` into ``staging``; the
    files copied, by relative path, with their (size, sha256)."""
    folder = _part_dir(src / config_name, part)
    inside = sorted(f.relative_to(src).as_posix() for f in (src / folder).rglob("*") if f.is_file())
    files = {}
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
        c.add_argument("--part", type=int, required=True)
    a = p.parse_args(argv)
    try:
        if a.cmd == "place":
            doc = place(a.src, a.config, a.part, a.dest)
        else:
            doc = put(a.src, a.config, a.part, a.dest)
    except (CacheError, parts.PartitionError) as e:
        print(f"partition_cache: {e}")
        return 1
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
