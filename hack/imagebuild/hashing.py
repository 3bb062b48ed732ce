"""Input keys: what a cached layer is keyed by (hashes of JSON documents, files, trees)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from imagebuild import oci


def hash_inputs(doc: Any) -> str:
    return hashlib.sha256(oci.canonical_json(doc)).hexdigest()


def file_hash(path: Path) -> str:
    return oci.sha256_file(path).split(":", 1)[1]


def tree_hash(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> str:
    """Hash of the relative paths, modes (executable or not) and contents under ``root``."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if skip(path) or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        h.update(f"{rel}\0{os.access(path, os.X_OK)}\0{file_hash(path)}\n".encode())
    return h.hexdigest()
