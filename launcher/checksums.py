"""Files and their SHA-256: one file's, a folder's manifest (relative path -> size, sha256),
the bytes a manifest adds up to. What the partition server, the pullers, the workers'
``remote manifest``, the partition cache and the checkpoints check files with."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: relative path -> (size, sha256)."""
    out: dict[str, tuple[int, str]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = (path.stat().st_size, file_sha256(path))
    return out


def total_bytes(m: dict[str, tuple[int, str]]) -> int:
    return sum(size for size, _ in m.values())
