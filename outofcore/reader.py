"""Asking the kernel for feature rows before they are gathered, off the training thread.

A process that serves or trains on out-of-core features has one :class:`Reader`: a thread
that takes ranges of the feature files' mappings and asks the kernel to read them into the
page cache (``MADV_WILLNEED``: the reads are queued to the disk at once, all of them in
flight together, and the call does not wait for them). A minibatch's rows are tens of
thousands of ranges; they go to the kernel :data:`IOV_MAX` at a time with
``process_madvise(2)`` (one call, not one per range: asking for pages already in memory
then costs the kernel a lookup each, and this process nothing), else one ``madvise`` each.
The caller goes on (sampling the next minibatch, training this one); the gather that later
touches those rows finds them in memory, or waits on a read already in flight rather than
starting its own.

Its work, in this order of priority:

* **rows** (:meth:`Reader.rows`): the rows a minibatch sampled ahead will gather, and jobs
  the patch hands it (:meth:`Reader.call`: a look at which pages are still in memory);
* **warm** (:meth:`Reader.warm`): a whole file, read in its on-disk order, in chunks of
  :data:`WARM_CHUNK`, while the process's memory cgroup has room for it beside everything
  else (:func:`room`): a worker whose limit holds its features reads them at the disk's
  sequential speed instead of one page fault at a time (the patch warms only when the room
  holds all of a part's files; should the room go, warming stops).

numpy, the standard library and podcontract (its lines, said whole beside the training
thread's) only.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from podcontract.logline import say

PAGE = mmap.PAGESIZE
WARM_CHUNK = 32 << 20  # bytes a warming step asks for at once
# what a warming worker leaves free under its cgroup's limit: the minibatches, the rows read
# ahead and DGL's buffers grow into it (the memory plan's sampling working set is larger)
WARM_RESERVE = 512 << 20
CGROUP_V1 = Path("/sys/fs/cgroup/memory")
CGROUP_V2 = Path("/sys/fs/cgroup")


def ranges(ids: np.ndarray[Any, Any], row_bytes: int, offset: int) -> tuple[Any, Any]:
    """The byte ranges of the pages that rows ``ids`` (rows of ``row_bytes`` from byte
    ``offset`` of a page-aligned mapping) lie on: (starts, lengths), sorted, adjacent pages
    merged."""
    if not len(ids):
        empty = np.zeros(0, np.int64)
        return empty, empty
    ids = np.unique(ids.astype(np.int64, copy=False))
    first = (offset + ids * row_bytes) // PAGE
    last = (offset + ids * row_bytes + row_bytes - 1) // PAGE
    cut = np.flatnonzero(first[1:] > last[:-1] + 1) + 1
    starts = first[np.concatenate(([0], cut))]
    ends = last[np.concatenate((cut - 1, [len(ids) - 1]))]
    return starts * PAGE, (ends - starts + 1) * PAGE


IOV_MAX = 1024  # ranges per process_madvise call (the kernel's UIO_MAXIOV)
SYS_PROCESS_MADVISE = 440  # x86_64 and aarch64 (the generic syscall table)
MADV_WILLNEED = mmap.MADV_WILLNEED
_native: dict[str, Any] = {}


def _libc() -> Any:
    if "libc" not in _native:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _native["libc"] = libc
        try:
            _native["pidfd"] = os.pidfd_open(os.getpid())
        except (AttributeError, OSError):
            _native["pidfd"] = None
    return _native["libc"]


def willneed(addresses: Any, lengths: Any) -> int:
    """``MADV_WILLNEED`` for each range (its address, its length in bytes); the bytes asked
    for. ctypes lets go of the GIL while the kernel works."""
    libc = _libc()
    pidfd = _native["pidfd"]
    iov = np.empty((len(addresses), 2), np.uint64)
    iov[:, 0], iov[:, 1] = addresses, lengths
    done = 0
    if pidfd is not None and _native.get("process_madvise", True):
        while done < len(iov):
            chunk = iov[done : done + IOV_MAX]
            got = libc.syscall(
                ctypes.c_long(SYS_PROCESS_MADVISE),
                ctypes.c_int(pidfd),
                ctypes.c_void_p(chunk.ctypes.data),
                ctypes.c_size_t(len(chunk)),
                ctypes.c_int(MADV_WILLNEED),
                ctypes.c_uint(0),
            )
            if got < 0:
                if ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
                    _native["process_madvise"] = False  # (an older kernel: one call a range)
                break  # (else a range that is gone: the rest are asked for one by one)
            done += len(chunk)
    for address, length in iov[done:].tolist():
        libc.madvise(ctypes.c_void_p(address), length, MADV_WILLNEED)
    return int(np.asarray(lengths).sum())


def resident_pages(address: int, length: int) -> np.ndarray[Any, Any] | None:
    """One byte per page of the mapping range [address, address + length), whose low bit
    is set when the page is in memory (``mincore(2)``: ~45 ms for 2 GiB); None when it
    cannot be asked."""
    vec = np.empty((length + PAGE - 1) // PAGE, np.uint8)
    if not len(vec) or _libc().mincore(ctypes.c_void_p(address), length, vec.ctypes.data) != 0:
        return None
    return vec


def resident_share(address: int, length: int) -> float:
    """The share of that range's pages in memory; 1.0 when it cannot be asked."""
    vec = resident_pages(address, length)
    return 1.0 if vec is None else float((vec & 1).mean())


def _cgroup_memory() -> tuple[int, int] | None:
    """(limit, usage) of this process's memory cgroup, page cache included; None when it has
    no limit (or the files cannot be read)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        folder: Path | None = None
        if "memory" in controllers.split(","):
            folder = CGROUP_V1 / path.lstrip("/")
            limit_file, usage_file = "memory.limit_in_bytes", "memory.usage_in_bytes"
        elif controllers == "" and (CGROUP_V2 / path.lstrip("/") / "memory.max").exists():
            folder = CGROUP_V2 / path.lstrip("/")
            limit_file, usage_file = "memory.max", "memory.current"
        if folder is None:
            continue
        try:
            limit_text = (folder / limit_file).read_text().strip()
            usage = int((folder / usage_file).read_text())
        except (OSError, ValueError):
            return None
        if limit_text == "max" or int(limit_text) >= 1 << 60:
            return None
        return int(limit_text), usage
    return None


def _available() -> int:
    """The host's MemAvailable, in bytes."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def free() -> int:
    """Bytes this process may still add to the page cache without pressing on its memory
    cgroup's limit (or the host's memory)."""
    host = _available()
    cgroup = _cgroup_memory()
    return max(0, host if cgroup is None else min(host, cgroup[0] - cgroup[1]))


def room() -> int:
    """:func:`free`, less :data:`WARM_RESERVE` (what warming leaves for the minibatches)."""
    return max(0, free() - WARM_RESERVE)


class Reader:
    """The process's reading thread (see the module's docstring); started on first use."""

    def __init__(self, on_warmed: Callable[[], None] | None = None) -> None:
        self._on_warmed = on_warmed  # called when every file asked for is warm
        self._rows: queue.SimpleQueue[tuple[int, Any, Any]] = queue.SimpleQueue()  # and calls
        self._warm: list[tuple[int, int, int]] = []  # (fd, next offset, end)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.warmed = 0  # bytes warming asked for
        self._warm_started = 0.0
        self._null: int | None = None
        self._warm_total = 0

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="outofcore-reader")
                self._thread.daemon = True
                self._thread.start()

    def rows(self, address: int, starts: Any, lengths: Any) -> None:
        """Read these ranges (from :func:`ranges`) of the mapping at ``address`` ahead, before
        any warming. The mapping must outlive the reads (the patch keeps its mappings for the
        process's life)."""
        if len(starts):
            self._start()
            self._rows.put((address, starts, lengths))
            self._wake.set()

    def call(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the reading thread, after the rows asked for before it."""
        self._start()
        self._rows.put((0, None, job))
        self._wake.set()

    def read(self, fd: int, spans: list[tuple[int, int]]) -> None:
        """Read these byte ranges [start, end) of ``fd`` into the page cache, in order, on the
        reading thread after what was asked before, whatever the room: the caller sized what
        it asks for (buffer order's partitions)."""
        for start, end in spans:
            if end > start:
                self.call(functools.partial(self._read, fd, start, end - start))

    def warm(self, spans: list[tuple[int, int, int]]) -> None:
        """Read each ``(fd, start, end)``'s bytes [start, end), in order, while there is
        :func:`room`; warming is done (said once, ``on_warmed`` called) after the last of
        them. All are queued at once: one at a time, the thread may finish the first before
        the next is queued, and say it is done with the rest unread."""
        spans = [(fd, start, end) for fd, start, end in spans if end > start]
        if spans:
            self._start()
            with self._lock:
                if not self._warm_started:
                    self._warm_started = time.monotonic()
                self._warm.extend(spans)
                self._warm_total += sum(end - start for _, start, end in spans)
            self._wake.set()

    def _read(self, fd: int, start: int, length: int) -> None:
        """Read ``fd``'s bytes [start, start + length) into the page cache: sent to
        ``/dev/null`` (``sendfile``: the kernel reads the pages, nothing is copied here).
        Not ``POSIX_FADV_WILLNEED``: the kernel reads no more than its read-ahead window
        (128 KiB here) per call of it."""
        if self._null is None:
            self._null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        end = start + length
        try:
            while start < end:
                sent = os.sendfile(self._null, fd, start, end - start)
                if sent <= 0:
                    break
                start += sent
        except OSError:
            return  # (a file closed under us: nothing to warm)

    def _run(self) -> None:
        while True:
            try:
                self._step()
            except Exception as e:  # (reading ahead only saves time: training goes on)
                say(f"out-of-core: the reading thread: {type(e).__name__}: {e}")

    def _step(self) -> None:
        try:
            address, starts, lengths = self._rows.get_nowait()
        except queue.Empty:
            if not self._warm_step():
                self._wake.wait()
                self._wake.clear()
            return
        if starts is None:  # (a job of call())
            lengths()
        else:
            willneed(address + starts, lengths)

    def _warm_step(self) -> bool:
        """One chunk of the first file still warming; False when there is none (or no room:
        warming then stops for good)."""
        with self._lock:
            if not self._warm:
                return False
            fd, start, end = self._warm[0]
            length = min(WARM_CHUNK, end - start)
            if room() < length:
                self._warm.clear()
                self._told("stopped: no more room in the pod's memory")
                return False
            if start + length >= end:
                self._warm.pop(0)
            else:
                self._warm[0] = (fd, start + length, end)
        self._read(fd, start, length)
        self.warmed += length
        if not self._warm:
            self._told("done")
            if self._on_warmed is not None:
                self._on_warmed()
        return True

    def _told(self, how: str) -> None:
        took = time.monotonic() - self._warm_started
        say(
            f"out-of-core: warming {how}: read {self.warmed / 2**20:.0f} of "
            f"{self._warm_total / 2**20:.0f} MiB of feature files in {took:.1f}s"
        )
