"""The partition cache bounded over every graph (launcher/storage/cache.py: Cache.bound): the
least recently used entries of any graph go until all of them fit the limit, never the entry in
use; what other jobs are writing (``.staging-``) and what cannot be read stay. Real files in
tmp_path; an entry's last use is its index's mtime, set here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from launcher.checksums import file_sha256
from launcher.options import parse
from launcher.storage import cache
from tests.launcher.helpers import FIXTURES, dglrun

PART = str(FIXTURES / "fake_partition.py")
TRAIN = str(FIXTURES / "fake_train.py")


def doc_of(graph: str, count: int = 2) -> dict[str, object]:
    return {"format": cache.FORMAT, "mode": "DGL-API", "graph_name": graph,
            "num_partitions": count, "run": "r"}  # fmt: skip


def committed(root: Path, graph: str, size: int, used: float, count: int = 2) -> str:
    """An entry as Cache.commit leaves it: a part file of ``size`` bytes and its index, last
    used at ``used`` (seconds since the epoch); its key."""
    doc = doc_of(graph, count)
    key = cache.key_of(doc)
    entry = root / key
    (entry / "part0").mkdir(parents=True)
    data = entry / "part0" / "graph.dgl"
    data.write_bytes(b"x" * size)
    files = {"part0/graph.dgl": [size, file_sha256(data)]}
    index = entry / cache.INDEX
    index.write_text(json.dumps({"key": key, "inputs": doc, "files": files}))
    os.utime(index, (used, used))
    return key


def sizes(root: Path) -> dict[str, int]:
    return {h.key: h.size for h in cache.held(root)}


def left(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()}


def test_the_least_recently_used_of_every_graph_go_until_the_cache_fits(tmp_path: Path) -> None:
    keys = {g: committed(tmp_path, g, 1000, used) for g, used in
            (("a", 1000.0), ("b", 2000.0), ("c", 3000.0), ("d", 4000.0))}  # fmt: skip
    mine = committed(tmp_path, "mine", 1000, 500.0)  # in use now: the oldest mark, yet kept
    each = sizes(tmp_path)
    assert each[keys["a"]] == 1000 + (tmp_path / keys["a"] / cache.INDEX).stat().st_size
    total = sum(each.values())
    # room for three entries: two must go, a and b (the least recently used), not mine
    limit = total - each[keys["a"]] - each[keys["b"]]
    gone = cache.Cache(tmp_path, limit).bound(mine)
    assert left(tmp_path) == {keys["c"], keys["d"], mine}
    assert len(gone) == 2
    # each line names the entry, its graph, count, size and last use, and the cache's total
    assert gone[0].startswith(f"removed cached partitions {keys['a']} (graph a, 2 partitions, ")
    assert "last used 1970-01-01 00:16 UTC" in gone[0]
    assert gone[0].endswith(
        f"the least recently used of every graph's, the cache holding {cache.amount(total)}, "
        f"over its limit of {cache.amount(limit)} (--cache-limit, spec.storage.cacheLimit)"
    )
    assert gone[1].startswith(f"removed cached partitions {keys['b']} (graph b, ")
    assert cache.amount(total - each[keys["a"]]) in gone[1]
    assert sum(sizes(tmp_path).values()) <= limit
    # within the limit now: nothing more goes
    assert cache.Cache(tmp_path, limit).bound(mine) == []
    assert left(tmp_path) == {keys["c"], keys["d"], mine}


def test_the_entry_in_use_stays_when_it_alone_is_over_the_limit(tmp_path: Path) -> None:
    old = committed(tmp_path, "old", 10, 1000.0)
    mine = committed(tmp_path, "mine", 5000, 2000.0)
    gone = cache.Cache(tmp_path, 4000).bound(mine)
    assert left(tmp_path) == {mine}
    assert gone[0].startswith(f"removed cached partitions {old} (graph old, ")
    (warning,) = gone[1:]  # said once
    assert warning.startswith(f"warning: the partitions in use, {mine} (graph mine, 2 partitions")
    assert warning.endswith("alone exceed the partition cache's limit of 3.9 KiB "
                            "(--cache-limit, spec.storage.cacheLimit): kept")  # fmt: skip
    # a limit of 0: only the partitions in use stay
    other = committed(tmp_path, "other", 10, 3000.0)
    gone = cache.Cache(tmp_path, 0).bound(mine)
    assert left(tmp_path) == {mine} and len(gone) == 2 and other in gone[0]


def test_what_other_jobs_are_writing_is_neither_counted_nor_touched(tmp_path: Path) -> None:
    old = committed(tmp_path, "old", 1000, 1000.0)
    mine = committed(tmp_path, "mine", 1000, 2000.0)
    staging = tmp_path / f"{cache.STAGING}{cache.key_of(doc_of('new'))}-0a1b2c3d"
    (staging / "part0").mkdir(parents=True)
    (staging / "part0" / "graph.dgl").write_bytes(b"x" * 100_000)
    os.utime(staging, (1.0, 1.0))
    removing = tmp_path / f".bad-{cache.key_of(doc_of('bad'))}-0a1b2c3d"  # (another's removal)
    removing.mkdir()
    limit = sum(sizes(tmp_path).values())  # exactly the two entries
    assert cache.Cache(tmp_path, limit).bound(mine) == []
    assert left(tmp_path) == {old, mine, staging.name, removing.name}
    assert (staging / "part0" / "graph.dgl").stat().st_size == 100_000
    # one byte less: the older entry goes, the staging folder (older still) stays
    (gone,) = cache.Cache(tmp_path, limit - 1).bound(mine)
    assert old in gone
    assert left(tmp_path) == {mine, staging.name, removing.name}


def test_entries_that_cannot_be_read_do_not_stop_the_eviction(tmp_path: Path) -> None:
    mine = committed(tmp_path, "mine", 100, 5000.0)
    old = committed(tmp_path, "old", 100, 1000.0)
    garbage = {"not-json": "{ nope", "a-list": "[1, 2]", "binary": "\udcff"}
    for name, text in garbage.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / cache.INDEX).write_bytes(text.encode("utf-8", "surrogateescape"))
        os.utime(tmp_path / name / cache.INDEX, (1.0, 1.0))
    (tmp_path / "no-index" / "part0").mkdir(parents=True)
    (tmp_path / "a-file").write_text("not an entry")
    # an index whose files are not sizes (and one naming a file outside its entry): counted by
    # walking the entry, removed like any other
    walked = {}
    for name, files in (("bad-files", {"part0/g": ["big", "x"]}), ("unsafe", {"../x": [1, "x"]})):
        (tmp_path / name / "part0").mkdir(parents=True)
        (tmp_path / name / "part0" / "g").write_bytes(b"y" * 300)
        index = tmp_path / name / cache.INDEX
        index.write_text(json.dumps({"key": name, "files": files}))
        os.utime(index, (500.0, 500.0))
        walked[name] = 300 + index.stat().st_size
    assert {k: v for k, v in sizes(tmp_path).items() if k in walked} == walked
    assert set(sizes(tmp_path)) == {mine, old, *walked}
    gone = cache.Cache(tmp_path, sizes(tmp_path)[mine]).bound(mine)
    assert [line.split()[3] for line in gone] == ["bad-files", "unsafe", old]
    assert "(graph ?, ? partitions, " in gone[0]
    assert left(tmp_path) == {mine, *garbage, "no-index", "a-file"}


def test_the_per_graph_rule_still_keeps_the_newest_counts(tmp_path: Path) -> None:
    """Cache.evict first (the same graph's counts beyond KEEP_COUNTS), then Cache.bound, as
    dglrun calls them: a generous limit removes nothing more."""
    counts = {n: committed(tmp_path, "g", 100, 1000.0 + n, count=n) for n in (1, 2, 3)}
    other = committed(tmp_path, "h", 100, 10.0)
    mine = committed(tmp_path, "g", 100, 5000.0, count=4)
    c = cache.Cache(tmp_path, 10**9)
    assert c.evict(mine, doc_of("g", 4)) == [f"{counts[1]} (1 partitions): the least recently used"]
    assert c.bound(mine) == []
    assert left(tmp_path) == {counts[2], counts[3], other, mine}
    # room for two: the oldest of every graph go, h's, then g's count 2
    gone = cache.Cache(tmp_path, 2 * sizes(tmp_path)[mine]).bound(mine)
    assert [line.split()[3] for line in gone] == [other, counts[2]]


def test_a_lookup_marks_the_entry_used_before_checking_it(tmp_path: Path) -> None:
    """Checking every file of a big entry takes a while: meanwhile another job's eviction
    must see it as just used, not as the one it last used days ago."""
    entry = tmp_path / "k"
    (entry / "part0").mkdir(parents=True)
    config = {"graph_name": "g", "num_parts": 1, "part-0": {"part_graph": "part0/graph.dgl"}}
    (entry / "g.json").write_text(json.dumps(config))
    (entry / "part0" / "graph.dgl").write_text("graph")
    files = {rel: [(entry / rel).stat().st_size, file_sha256(entry / rel)]
             for rel in ("g.json", "part0/graph.dgl")}  # fmt: skip
    (entry / cache.INDEX).write_text(json.dumps({"key": "k", "inputs": {}, "files": files}))
    os.utime(entry / cache.INDEX, (1000.0, 1000.0))
    assert cache.Cache(tmp_path).lookup("k", "g", 1).pset is not None
    (mine,) = cache.held(tmp_path)
    assert mine.used > 1000.0


def test_without_a_limit_half_the_filesystem_is_the_bound(tmp_path: Path) -> None:
    size = cache.filesystem_size(tmp_path)
    assert size is not None and size > 0
    old = committed(tmp_path, "old", 10, 1000.0)
    mine = committed(tmp_path, "mine", 10, 2000.0)
    assert cache.Cache(tmp_path).bound(mine) == []  # (a few bytes: far within half)
    assert left(tmp_path) == {old, mine}
    missing = tmp_path / "gone"
    assert cache.filesystem_size(missing) is None
    (line,) = cache.Cache(missing).bound(mine)
    assert line == (
        f"warning: the partition cache {missing} is not bounded across graphs: the size of its "
        "filesystem cannot be read (set spec.storage.cacheLimit, --cache-limit)"
    )


def test_amounts_are_read_as_binary_units() -> None:
    assert [cache.amount(n) for n in (0, 1023, 1024, 1536 * 2**20, 3 * 2**40, 2**52)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 GiB", "3.0 TiB", "4096.0 TiB"
    ]  # fmt: skip


# -- dglrun's flag ---------------------------------------------------------------------------


def test_cache_limit_flag_and_env_reach_the_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def limit(*extra: str, env: dict[str, str] | None = None) -> int | None:
        opts = parse(["-g", "g", "--train-entry-point", "t.py", "--partition-entry-point", PART,
                      "--transport", "local", "--storage", str(tmp_path), *extra],
                     env=env or {})  # fmt: skip
        assert opts.storage is not None
        return opts.storage.cache_limit

    assert limit() is None
    assert limit("--cache-limit", "20Gi") == 20 * 2**30
    assert limit("--cache-limit", "1.5G") == 1_500_000_000
    assert limit("--cache-limit", "0") == 0
    assert limit(env={"DGL_OPERATOR_CACHE_LIMIT": "500Mi"}) == 500 * 2**20
    assert limit("--cache-limit", "1Gi", env={"DGL_OPERATOR_CACHE_LIMIT": "500Mi"}) == 2**30
    for bad, why in (("20GB", "invalid quantity '20GB'"), ("-1Gi", "cannot be negative")):
        with pytest.raises(SystemExit) as e:
            limit(f"--cache-limit={bad}")
        assert e.value.code == 2 and why in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["-g", "g", "--train-entry-point", "t.py", "--partition-entry-point", PART,
               "--transport", "local", "--cache-limit", "1Gi"], env={})  # fmt: skip
    assert "--cache-limit: the partition cache is on --storage" in capsys.readouterr().err


def test_dglrun_evicts_other_graphs_partitions_over_its_limit_and_says_so(
    tmp_path: Path, no_leftovers: None
) -> None:
    """A claim shared by many jobs: two other graphs' partitions cached long ago; this run's
    new entry and a limit of 0 leave this run's partitions only, each removal in the log."""
    storage = tmp_path / "storage"
    (storage / "partitions").mkdir(parents=True)
    older = committed(storage / "partitions", "older", 2000, 1000.0)
    newer = committed(storage / "partitions", "newer", 2000, 2000.0)
    run = dglrun("--transport", "local", "-g", "g", "--num-partitions", "2",
                 "--workspace", str(tmp_path / "ws"), "--partition-entry-point", PART,
                 "--train-entry-point", TRAIN, "--storage", str(storage),
                 "--run-name", "job-1234abcd", "--cache-limit", "0")  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    (entry,) = (p for p in (storage / "partitions").iterdir() if not p.name.startswith("."))
    assert entry.name not in (older, newer)
    said = [line.strip() for line in run.stdout.splitlines() if "partitions" in line]
    removed = [line for line in said if line.startswith("removed cached partitions")]
    assert [line.split()[3] for line in removed] == [older, newer], run.stdout
    assert "(graph older, 2 partitions, " in removed[0]
    assert any(
        line.startswith(f"warning: the partitions in use, {entry.name} (graph g, 2 partitions")
        and line.endswith("kept")
        for line in said
    ), run.stdout
