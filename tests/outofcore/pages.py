"""What the out-of-core tests share: a file's pages out of the page cache."""

from __future__ import annotations

import os
from pathlib import Path


def evict(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (those no process has mapped in)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
