"""outofcore.buffer's pure parts: which rows make a logical partition, the byte ranges a
state reads, the buffer's size from the pod's room, and its settings' errors. The loader
itself runs on DGL 2.1 in tests/examples/test_pipeline.py (buffer order through dglrun)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from outofcore import buffer
from outofcore.buffer import BufferSettings, capacity, row_range, spans, thin_neighbourhoods

RowRange = Callable[[int, int, int], tuple[int, int]]


def misplaced(ranges: RowRange, num_logical: int, rows: int) -> list[int]:
    """The rows whose logical partition (``row * num_logical // rows``, as the loader's keys
    say) is not the one whose range holds them, or that no range or two ranges hold."""
    owner: dict[int, list[int]] = {}
    for p in range(num_logical):
        start, end = ranges(p, num_logical, rows)
        for row in range(start, end):
            owner.setdefault(row, []).append(p)
    return [r for r in range(rows) if owner.get(r) != [r * num_logical // rows]]


@pytest.mark.parametrize(("num_logical", "rows"), [(16, 1000), (16, 7), (3, 10), (8, 8), (5, 1)])
def test_the_logical_partitions_rows_are_those_the_keys_name(num_logical: int, rows: int) -> None:
    assert misplaced(row_range, num_logical, rows) == []


def test_the_check_catches_ranges_rounded_the_other_way() -> None:
    def floor(p: int, n: int, rows: int) -> tuple[int, int]:
        return p * rows // n, (p + 1) * rows // n

    assert misplaced(floor, 3, 10) != []  # rows 3, 6 and 9 fall in the wrong partition


def test_a_states_reads_are_whole_partitions_and_neighbours_are_one_read() -> None:
    # 16 rows of 8 bytes from offset 4096, 4 logical partitions of 4 rows (32 bytes)
    assert spans((2, 0, 1), 4, 16, 8, 4096) == [(4096, 4096 + 96)]
    assert spans((0, 3), 4, 16, 8, 4096) == [(4096, 4128), (4096 + 96, 4096 + 128)]
    assert spans((), 4, 16, 8, 4096) == []
    assert spans((4,), 8, 3, 8, 0) == []  # (an empty logical partition: nothing to read)


def test_the_buffer_holds_what_the_room_does_less_one_partition_read_ahead() -> None:
    gib = 1 << 30
    assert capacity(8 * gib, 8, 100 * gib) == 8  # room for all: one state
    assert capacity(8 * gib, 8, 4 * gib) == 3  # half: 4 partitions, one kept for the next
    assert capacity(8 * gib, 8, int(4.5 * gib)) == 3
    assert capacity(8 * gib, 8, 0) == 1  # never less than one
    assert capacity(0, 8, 0) == 8  # no features mapped: nothing to hold back


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (buffer.PARTITIONS_ENV, buffer.CAPACITY_ENV, buffer.SEED_ENV, buffer.ORDER_ENV):
        monkeypatch.delenv(name, raising=False)
    assert BufferSettings.from_env() == BufferSettings(buffer.DEFAULT_PARTITIONS, None, 0)
    assert buffer.order() == buffer.EXACT
    monkeypatch.setenv(buffer.PARTITIONS_ENV, "4")
    monkeypatch.setenv(buffer.CAPACITY_ENV, "2")
    monkeypatch.setenv(buffer.SEED_ENV, "7")
    monkeypatch.setenv(buffer.ORDER_ENV, "Buffer")
    assert BufferSettings.from_env() == BufferSettings(4, 2, 7)
    assert BufferSettings.from_env().logical == 4 * buffer.PER_PHYSICAL
    assert buffer.order() == buffer.BUFFER


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        (buffer.PARTITIONS_ENV, "0", "expected a whole number of at least 1"),
        (buffer.CAPACITY_ENV, "half", "expected a whole number of at least 1"),
        (buffer.SEED_ENV, "x", "expected a whole number"),
        (buffer.ORDER_ENV, "buffer", "expected one of Exact, Buffer"),
    ],
)
def test_a_bad_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(buffer.BufferError) as e:
        buffer.order()
        BufferSettings.from_env()
    assert str(e.value).startswith(f"{name}={value!r}: {said}")


def test_a_trainer_warns_when_the_buffer_thins_what_a_hop_samples_from() -> None:
    """Degree 10, fan-out 10, 7 of 16 partitions: ~4.4 resident neighbours for the 10 asked
    (the case where buffer order measured 3 points under Exact order)."""
    said = thin_neighbourhoods(10.0, [10, 10], 7, 16)
    assert "10.0 in-neighbours on average, 4.4 of them in the buffer (7 of 16 partitions)" in said
    assert "fan-out is 10,10" in said, said
    assert thin_neighbourhoods(10.0, [4, 4], 7, 16)  # 4.4 for 4: measured 3.4 points under
    assert thin_neighbourhoods(30.0, [-1], 7, 16)  # (every neighbour asked)
    assert thin_neighbourhoods(30.0, [4, 12], 7, 16)  # (one hop thinned is enough)


@pytest.mark.parametrize(
    ("degree", "fanouts", "held"),
    [
        (30.0, [10, 10], 7),  # 13.1 resident for 10 asked (measured: the same accuracy)
        (10.0, [10, 10], 16),  # every partition held
        (3.0, [10, 10], 15),  # 2.8 resident of the 3 a hop takes in memory
        (0.0, [10], 7),  # no edges: nothing to thin
        (10.0, [], 7),  # no fan-out known
    ],
)
def test_no_warning_when_a_hop_has_as_many_to_sample_from_as_in_memory(
    degree: float, fanouts: list[int], held: int
) -> None:
    assert thin_neighbourhoods(degree, fanouts, held, 16) == ""
