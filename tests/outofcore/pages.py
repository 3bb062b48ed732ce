"""What the out-of-core tests share: a file's pages out of the page cache, the bytes a thread
has had read from storage, and pages locked in memory.

Why the second and not "the pages are in the page cache now": the kernel evicts freshly read,
unmapped pages first whenever memory runs short anywhere on the machine (another process
streaming a file is enough: reproduced with 1.4 GB free and a `cat` of a 4 GB file in a loop,
7 of 100 warmings then had all 3000 pages evicted within 3 s). A check of residency after a
read flaked so in CI; a read once made stays counted."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def evict(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (those no process has mapped in)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def fetched() -> int:
    """Bytes the calling thread has had read from storage so far (``read_bytes`` of
    /proc/thread-self/io: counted when the read is sent to the disk, so at once for the
    kernel's asynchronous read-ahead too). The thread's, not the process's: any thread's
    page faults on code the kernel evicted are reads too."""
    for line in Path("/proc/thread-self/io").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == "read_bytes":
            return int(value)
    raise AssertionError("/proc/thread-self/io has no read_bytes: no task I/O accounting")


@contextmanager
def held(address: int, length: int) -> Iterator[None]:
    """The pages of that mapped range read in and locked in memory (``mlock``: no pressure can
    evict them; a page only read may be gone the next moment, see above)."""
    if _libc.mlock(ctypes.c_void_p(address), ctypes.c_size_t(length)) != 0:
        raise OSError(ctypes.get_errno(), f"mlock of {length} bytes")
    try:
        yield
    finally:
        _libc.munlock(ctypes.c_void_p(address), ctypes.c_size_t(length))


_libc = ctypes.CDLL(None, use_errno=True)
