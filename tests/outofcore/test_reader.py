"""outofcore.reader without DGL: the page ranges of rows, the kernel asked for them (one
process_madvise call per 1024 ranges), the reading thread, and warming a file in its order
while the memory has room."""

from __future__ import annotations

import mmap
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from outofcore import layout, reader
from tests.outofcore.pages import evict, fetched, held

PAGE = mmap.PAGESIZE


def feature_file(tmp_path: Path, rows: int = 3000) -> tuple[Path, np.ndarray[Any, Any]]:
    """A part's feature file of one page per row, out of the page cache, and its mapping."""
    layout.write(
        tmp_path, {"_N/feat": np.arange(rows * PAGE // 4, dtype=np.float32).reshape(rows, -1)}
    )
    path = layout.read_index(tmp_path)["_N/feat"]
    mapped = layout.open_rows(path, random=True)
    evict(path)  # (after the header's read, which read ahead)
    return path, mapped


def in_memory(mapped: np.ndarray[Any, Any], ids: Any) -> bool:
    """Whether any page of rows ``ids`` is in memory now (a page read may be evicted again at
    once: only its absence is a fact; see tests/outofcore/pages)."""
    where = layout.mapping(mapped)
    assert where is not None
    pages = (mapped.ctypes.data - where[0]) // PAGE + np.asarray(ids)
    resident = layout.resident_pages(mapped)
    assert resident is not None
    return bool((resident[pages] & 1).any())


def on_the_reading_thread(r: reader.Reader) -> int:
    """:func:`fetched` of ``r``'s reading thread, asked once the rows and warming asked for
    before are read (20 s at most)."""
    seen: list[int] = []
    done = threading.Event()

    def job() -> None:
        seen.append(fetched())
        done.set()

    r.call(job)
    assert done.wait(20), "the reading thread ran no job in 20 s"
    return seen[0]


def test_ranges_are_the_rows_pages_sorted_and_merged() -> None:
    # one page per row: rows 3, 4, 5 are one range; 7 and 50 their own; duplicates once
    starts, lengths = reader.ranges(np.array([50, 5, 3, 4, 7, 3]), PAGE, 0)
    assert starts.tolist() == [3 * PAGE, 7 * PAGE, 50 * PAGE]
    assert lengths.tolist() == [3 * PAGE, PAGE, PAGE]
    # rows of 100 bytes from byte 4000: row 0 spans pages 0-1, rows 1-40 fit pages 1-4
    starts, lengths = reader.ranges(np.array([0, 40]), 100, 4000)
    assert (starts.tolist(), lengths.tolist()) == ([0], [2 * PAGE])
    empty = reader.ranges(np.array([], np.int64), PAGE, 0)
    assert [len(x) for x in empty] == [0, 0]


def test_willneed_reads_every_range_asked_for_in_one_call_per_1024(tmp_path: Path) -> None:
    _, mapped = feature_file(tmp_path)
    ids = np.arange(0, 3000, 2)  # 1500 ranges of one page: two process_madvise calls
    where = layout.mapping(mapped)
    assert where is not None
    starts, lengths = reader.ranges(ids, PAGE, mapped.ctypes.data - where[0])
    assert len(starts) == 1500
    before = fetched()
    assert reader.willneed(where[0] + starts, lengths) == 1500 * PAGE
    assert fetched() - before >= 1500 * PAGE  # (sent to the disk by the call)
    time.sleep(0.2)
    assert not in_memory(mapped, [1, 2999])  # (the rows between: not asked for)
    assert reader.willneed(where[0] + starts, lengths) == 1500 * PAGE  # in memory: accepted
    assert float(mapped[ids[-1]][0]) == ids[-1] * PAGE // 4


def test_the_reader_thread_reads_rows_first_and_warms_a_file_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, mapped = feature_file(tmp_path)
    where = layout.mapping(mapped)
    assert where is not None
    r = reader.Reader()
    starts, lengths = reader.ranges(np.array([10, 20]), PAGE, mapped.ctypes.data - where[0])
    before = on_the_reading_thread(r)
    r.rows(where[0], starts, lengths)
    rows = on_the_reading_thread(r) - before
    assert 2 * PAGE <= rows < 1000 * PAGE, rows  # the two rows' pages, not the file's 3000
    fd = os.open(path, os.O_RDONLY)
    try:
        r.warm([(fd, layout.DATA_OFFSET, layout.DATA_OFFSET + mapped.nbytes)])
        deadline = time.monotonic() + 20
        while "warming done" not in capsys.readouterr().out and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.warmed == mapped.nbytes
        warmed = on_the_reading_thread(r) - before
        assert warmed >= 3000 * PAGE, warmed  # every page read from the disk
    finally:
        os.close(fd)


def warm_files(fds: list[int], sizes: list[int], at_once: bool) -> tuple[reader.Reader, str]:
    """Warm the files with a new reader, all in one call or one call each (waiting for each
    to be read); the reader and what it said (``reader.say`` is patched to append to OUT)."""
    OUT.clear()
    done = threading.Event()
    r = reader.Reader(on_warmed=done.set)
    ends = [layout.DATA_OFFSET + n for n in sizes]
    spans = [(fd, layout.DATA_OFFSET, end) for fd, end in zip(fds, ends, strict=True)]
    for batch in [spans] if at_once else [[span] for span in spans]:
        done.clear()
        r.warm(batch)
        assert done.wait(20)
    return r, "\n".join(line for line in OUT if "warming" in line)


OUT: list[str] = []


def test_files_warmed_together_are_done_once_after_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part's files are queued in one call: the reader says it is done (and the server
    writes its warmed mark, which tells trainers to stop reading ahead) once, after the last
    file, naming them all. Twin: one call per file lets the thread say "done" after the first,
    with the rest unread: what that one line forbids."""
    monkeypatch.setattr(reader, "say", OUT.append)
    files = [feature_file(tmp_path / str(k), rows) for k, rows in enumerate((300, 3000, 6000))]
    fds = [os.open(path, os.O_RDONLY) for path, _ in files]
    sizes = [mapped.nbytes for _, mapped in files]
    try:
        r, said = warm_files(fds, sizes, at_once=True)
        assert said.count("warming done") == 1, said
        assert r.warmed == sum(sizes), (r.warmed, sizes)
        assert f"read {sum(sizes) / 2**20:.0f} of {sum(sizes) / 2**20:.0f} MiB" in said, said
        _, said = warm_files(fds, sizes, at_once=False)
        assert said.count("warming done") == 3, said  # (the first after 1 of the 3 files)
    finally:
        for fd in fds:
            os.close(fd)


def test_warming_stops_where_the_room_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, mapped = feature_file(tmp_path, rows=20000)  # 78 MiB: three warming steps
    room = iter([reader.WARM_CHUNK * 2, reader.WARM_CHUNK, 0])
    monkeypatch.setattr(reader, "room", lambda: next(room, 0))
    r = reader.Reader()
    fd = os.open(path, os.O_RDONLY)
    try:
        r.warm([(fd, layout.DATA_OFFSET, layout.DATA_OFFSET + mapped.nbytes)])
        deadline = time.monotonic() + 20
        out = ""
        while "warming stopped" not in out and time.monotonic() < deadline:
            out += capsys.readouterr().out
            time.sleep(0.05)
        assert "out-of-core: warming stopped: no more room in the pod's memory: read 64 of " in out
        assert r.warmed == 2 * reader.WARM_CHUNK
    finally:
        os.close(fd)


def test_room_is_the_smaller_of_the_cgroups_and_the_hosts_less_the_reserve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gib = 2**30
    monkeypatch.setattr(reader, "_available", lambda: 10 * gib)
    monkeypatch.setattr(reader, "_cgroup_memory", lambda: (4 * gib, 1 * gib))  # limit, usage
    assert reader.room() == 3 * gib - reader.WARM_RESERVE
    monkeypatch.setattr(reader, "_cgroup_memory", lambda: None)  # no limit: the host's
    assert reader.room() == 10 * gib - reader.WARM_RESERVE
    monkeypatch.setattr(reader, "_available", lambda: reader.WARM_RESERVE // 2)
    assert reader.room() == 0
    # this process's own cgroup, as the kernel tells it: a number (or no limit)
    monkeypatch.undo()
    found = reader._cgroup_memory()
    assert found is None or (found[0] > 0 and found[1] > 0)


def test_resident_share_and_a_job_on_the_reading_thread(tmp_path: Path) -> None:
    _, mapped = feature_file(tmp_path, rows=256)
    where = layout.mapping(mapped)
    assert where is not None
    assert reader.resident_share(*where) < 0.1  # (evicted)
    seen: list[float] = []
    done = threading.Event()
    r = reader.Reader()

    def job() -> None:
        seen.append(reader.resident_share(*where))
        done.set()

    with held(*where):  # every page read, and kept
        assert reader.resident_share(*where) == 1.0
        r.call(job)
        assert done.wait(20) and seen == [1.0]
