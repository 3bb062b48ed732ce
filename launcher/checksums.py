"""Files and their SHA-256: one file's, a folder's manifest (relative path -> size, sha256),
the bytes a manifest adds up to. What the partition server, the pullers, the workers'
``remote manifest``, the partition cache and the checkpoints check files with.

A manifest read from somewhere others can write (a claim, a partition server) names files
that must stay inside the folder it describes: :func:`outside` says why a name does not,
:func:`links` finds the symbolic links a folder holds, and :func:`open_inside` opens a file
below a folder without following any link on the way.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import BinaryIO


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


def outside(rel: str) -> str | None:
    """Why the manifest name ``rel`` does not stay inside its folder (None: it does):
    empty, absolute, or with a ``..`` part."""
    if not rel:
        return "an empty name"
    if os.path.isabs(rel):
        return "an absolute name"
    if ".." in PurePosixPath(rel).parts:
        return "a name with '..'"
    return None


def links(root: Path) -> list[str]:
    """The symbolic links under ``root`` (relative paths; links to folders are not entered)."""
    found = []
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(top) / name
            if path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def open_inside(root: Path, rel: str) -> BinaryIO:
    """Open ``root/rel`` for reading, refusing a name outside ``root`` and a symbolic link
    anywhere below ``root`` (each folder on the way is opened with O_NOFOLLOW, so a link
    planted while we read is refused too): OSError (ELOOP, ENOTDIR) or ValueError."""
    why = outside(rel)
    if why is not None:
        raise ValueError(f"{rel!r} is {why}")
    *folders, name = PurePosixPath(rel).parts
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for folder in folders:
            inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)
    return os.fdopen(leaf, "rb")
