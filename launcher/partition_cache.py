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

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from launcher import partitions as parts
from launcher.cli import DGL_API, Options

FORMAT = 1  # bump when what an entry holds changes: older entries then miss
INDEX = ".dglrun-cache.json"  # (a dot file: no graph name can collide with it)
STAGING = ".staging-"


class CacheError(RuntimeError):
    """The cache cannot be read or written; ``str()`` names the path."""


def _tree_hash(path: Path) -> str:
    """SHA-256 over a file, or a folder's files by relative path (content, not dates)."""
    if path.is_file():
        return parts.file_sha256(path)
    if not path.is_dir():
        raise CacheError(f"--partition-inputs {path} does not exist")
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path).as_posix()}\0{parts.file_sha256(f)}\n".encode())
    return h.hexdigest()


def inputs(opts: Options, run: str, share: bool) -> dict[str, object]:
    """What the partitions are made from, as the key's hash covers it (readable: it is
    kept in the entry's index and printed when an entry is not found)."""
    doc: dict[str, object] = {
        "format": FORMAT,
        "mode": opts.partition_mode,
        "graph_name": opts.graph_name,
        "num_partitions": opts.num_partitions,
        "balance_train": opts.balance_train,
        "balance_edges": opts.balance_edges,
        "partition_args": list(opts.partition_args),
        "dataset_url": opts.dataset_url,
    }
    content: dict[str, str] = {}
    if opts.partition_mode == DGL_API:
        assert opts.partition_entry_point is not None
        content[opts.partition_entry_point] = _tree_hash(Path(opts.partition_entry_point))
        for named in opts.partition_inputs:
            content[named] = _tree_hash(Path(named))
    else:
        from launcher.chunked import ChunkedError, load

        assert opts.chunked_graph is not None
        try:
            graph = load(opts.chunked_graph)
        except ChunkedError as e:
            raise CacheError(str(e)) from e
        files = [graph.metadata, *(f for col in graph.columns() for f in col.files)]
        for f in files:
            try:
                content[str(f)] = parts.file_sha256(f)
            except OSError as e:
                raise CacheError(f"chunked graph: cannot read {f}: {e.strerror}") from e
    doc["content"] = content
    graph_known = opts.partition_mode != DGL_API or bool(opts.partition_inputs)
    if not (share and graph_known):
        doc["run"] = run  # the graph is the job's own: only its restarts share the entry
    return doc


def key_of(doc: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


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
            doc = json.loads(index.read_text())
            want = {str(k): (int(v[0]), str(v[1])) for k, v in doc["files"].items()}
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            return Lookup(problem=self._drop(entry, f"{index} is unreadable ({e})"))
        got = parts.manifest(entry)
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

    def commit(
        self, staging: Path, key: str, doc: dict[str, object], pset: parts.PartitionSet
    ) -> Lookup:
        """Index the partitions written in ``staging`` and move them into place; if another
        job committed the same key meanwhile, that entry is used and ours removed."""
        files = parts.manifest(staging)
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
