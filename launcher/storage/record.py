"""The partitions a run trains on: ``runs/<run>/partitions.json``, each count's cache key.

A run is one DGLJob (its restarts, rescales and resumes share it). Its first partitioning
makes the partition sets it trains on, of every count an elastic job may have
(``--partition-counts``), and each attempt that made or reused a set records here the cache
entry that holds it. A later attempt whose count is recorded takes that entry (each file
checked against its SHA-256 on the way, as any cache hit) without reading the chunked graph:
the chunks a lost worker held (layout ``PerWorker``) are not needed again, nothing is hashed,
and the memory plan takes the graph's sizes recorded with it. A recorded entry that is gone
(evicted, damaged) is forgotten, and the usual lookup follows. The run keeps the partitions it
started with: its checkpoints were trained on them.

The file is the run's own (its folder is named after the job's uid); what it names is checked
before use: a key is 32 hex digits (a folder of the cache, nothing else), a count a few
decimal digits and sizes are integers. It is read bounded (launcher/jsonfile.py): an unreadable
record (too large, too deep, not JSON, not an object) is no record, said once in the log; a
count or key of another shape is not taken. Standard library only (dglrun's layer).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from launcher import jsonfile
from launcher.storage.layout import Storage

RECORD = "partitions.json"
KEY = re.compile(r"[0-9a-f]{32}")
COUNT = re.compile(r"[1-9][0-9]{0,5}")  # a partition count, as _save writes it (ASCII digits)
SIZE_FIELDS = ("nodes", "edges", "node_bytes", "edge_bytes")


@dataclass(frozen=True)
class RunPartitions:
    """What a run recorded: the cache key of each count's partitions, and the graph's sizes
    (``SIZE_FIELDS``, as the memory plan takes them; empty when unknown)."""

    keys: dict[int, str] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)


def _path(storage: Storage) -> str:
    return str(storage.run_dir / RECORD)


def read(storage: Storage) -> RunPartitions:
    """The run's record (empty when there is none, or it cannot be read or is not ours)."""
    doc = jsonfile.entry(_path(storage))
    if not isinstance(doc, dict):
        return RunPartitions()
    raw_keys = doc.get("keys")
    keys = {}
    for count, key in raw_keys.items() if isinstance(raw_keys, dict) else ():
        if COUNT.fullmatch(count) and isinstance(key, str) and KEY.fullmatch(key):
            keys[int(count)] = key
    raw = doc.get("size")
    raw = raw if isinstance(raw, dict) else {}
    size = {k: v for k, v in raw.items() if k in SIZE_FIELDS and type(v) is int and v >= 0}
    return RunPartitions(keys, size if set(size) == set(SIZE_FIELDS) else {})


def write(storage: Storage, keys: Mapping[int, str], size: Mapping[str, int] | None) -> str:
    """Add ``keys`` (and the sizes, when given) to the run's record. Best effort: returns why
    it could not, else ""."""
    had = read(storage)
    return _save(storage, {**had.keys, **keys}, dict(size) if size else had.size)


def forget(storage: Storage, count: int) -> None:
    """Drop ``count``'s key (its entry is gone): the next attempt looks it up as usual."""
    had = read(storage)
    if count in had.keys:
        _save(storage, {c: k for c, k in had.keys.items() if c != count}, had.size)


def _save(storage: Storage, keys: Mapping[int, str], size: Mapping[str, int]) -> str:
    """The record, by rename (a reader never sees half of it): why it could not, else ""."""
    doc = {"keys": {str(c): k for c, k in sorted(keys.items())}, "size": dict(size)}
    path = _path(storage)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        return f"cannot write {path}: {e.strerror}"
    return ""
