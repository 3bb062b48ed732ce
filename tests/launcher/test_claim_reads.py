"""Crafted files on the claim (issue 57): a cache entry's index, a run's ``partitions.json``, a
partition config. Each is read bounded (launcher/jsonfile.py); a refused one is "no entry" with
one line naming it, never a traceback. Every refusal has a well-formed twin that is read: a
reader refusing everything fails these tests."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from launcher import jsonfile
from launcher.partition import output as parts
from launcher.storage import cache, record
from launcher.storage.layout import Storage

KEY = "a" * 32
SHA = "0" * 64


def nested(depth: int) -> str:
    return '{"files": ' + "[" * depth + "]" * depth + "}"


def index_doc(**extra: object) -> dict[str, object]:
    return {"key": KEY, "inputs": {"graph_name": "g", "num_partitions": 2}, "files": {}, **extra}


def entry_with(root: Path, name: str, text: str | bytes) -> Path:
    entry = root / name
    entry.mkdir(parents=True)
    index = entry / cache.INDEX
    index.write_bytes(text.encode() if isinstance(text, str) else text)
    return index


# -- the reader ---------------------------------------------------------------------------------


def test_a_nesting_100k_deep_is_refused_without_recursion(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(nested(100_000))
    with pytest.raises(RecursionError):
        json.loads(deep.read_text())  # (what an unbounded read met)
    with pytest.raises(jsonfile.Unreadable, match=f"{deep} nests more than 64 levels deep"):
        jsonfile.read(deep)
    twin = tmp_path / "twin.json"
    twin.write_text(nested(60))
    assert isinstance(jsonfile.read(twin), dict)
    # brackets inside strings are text, not nesting
    quoted = tmp_path / "quoted.json"
    text = "[" * 1000 + '"' + "{" * 1000
    quoted.write_text(json.dumps({"s": text}))
    assert jsonfile.read(quoted) == {"s": text}


def test_a_file_over_the_limit_is_refused_unparsed(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # 50 MB, sparse: quick to write
        f.write(b'{"files": {}, "pad": "')
        f.truncate(50 * 1024 * 1024)
    with pytest.raises(jsonfile.Unreadable, match=f"{big} is over {jsonfile.LIMIT} bytes"):
        jsonfile.read(big)
    small = tmp_path / "small.json"
    small.write_text('{"files": {}, "pad": "' + "x" * 1000 + '"}')
    assert isinstance(jsonfile.read(small), dict)


def test_not_json_and_the_wrong_type_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    for content, why in (
        (b"\xff\xfe\x00garbage", "is not UTF-8 text"),
        (b"{not json", "is not JSON"),
        (b"[1, 2, 3]", "is not an object (a list)"),
        (b"1" * 5000, "is not JSON"),  # (more digits than int() takes)
    ):
        path.write_bytes(content)
        with pytest.raises(jsonfile.Unreadable, match=re.escape(f"{path} {why}")):
            jsonfile.read(path)
    path.write_bytes(b"[1]")
    assert jsonfile.read(path, list) == [1]
    path.write_bytes(b'{"a": [1]}')
    assert jsonfile.read(path) == {"a": [1]}


def test_no_entry_is_said_once_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert jsonfile.entry(tmp_path / "missing.json") is None
    assert capsys.readouterr().out == ""  # a missing file is no entry, silently
    path = tmp_path / "f.json"
    path.write_text("[]")
    assert jsonfile.entry(path) is None
    out = capsys.readouterr().out
    assert out == f"dglrun: warning: {path} is not an object (a list); taken as no entry\n"
    path.write_text("{}")
    assert jsonfile.entry(path) == {}


# -- the cache's index --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "crafted, why",
    [
        (nested(100_000), "nests more than 64 levels deep"),
        ("[]", "is not an object"),
        (b"\x00\x01\x02", "is not JSON"),
        (json.dumps(index_doc(files=[1, 2])), "has no object 'files'"),
        (json.dumps(index_doc(files={"a": ["12", SHA]})), "is not listed as [size, sha256]"),
        (json.dumps(index_doc(files={"a": [-1, SHA]})), "is not listed as [size, sha256]"),
    ],
)
def test_a_crafted_index_is_no_entry(
    tmp_path: Path, crafted: str | bytes, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "partitions"
    index = entry_with(root, KEY, crafted)
    c = cache.Cache(root)
    assert c.index(KEY) is None
    assert str(index) in capsys.readouterr().out  # (one line naming it)
    # the eviction does not count an index it cannot read; one whose files are not sizes, by
    # a walk of the entry
    shape = why.startswith(("has no", "is not listed"))
    assert [h.key for h in cache.held(root)] == ([KEY] if shape else [])
    found = c.lookup(KEY, "g", 2)
    assert found.pset is None and why in found.problem and str(index) in found.problem
    assert not (root / KEY).exists()  # removed: the graph is partitioned again
    # its well-formed twin is read
    entry_with(root, KEY, json.dumps(index_doc(files={"a": [12, SHA]})))
    assert c.index(KEY) == {"a": (12, SHA)}
    assert c.inputs_of(KEY) == {"graph_name": "g", "num_partitions": 2}
    assert [h.key for h in cache.held(root)] == [KEY]


def test_a_50mb_index_is_no_entry_and_not_counted(tmp_path: Path) -> None:
    root = tmp_path / "partitions"
    index = entry_with(root, KEY, b'{"files": {}, "pad": "')
    with index.open("r+b") as f:
        f.truncate(50 * 1024 * 1024)
    good = "b" * 32
    entry_with(root, good, json.dumps(index_doc(files={"a": [12, SHA]})))
    c = cache.Cache(root)
    assert c.inputs_of(KEY) is None and c.index(KEY) is None
    assert [h.key for h in cache.held(root)] == [good]  # the twin is counted, it is not
    assert c.evict(good, {"graph_name": "g", "num_partitions": 2}) == []
    found = c.lookup(KEY, "g", 2)
    assert found.pset is None and f"{index} is over {jsonfile.LIMIT} bytes" in found.problem


def test_a_deep_partition_config_is_a_partition_error(tmp_path: Path) -> None:
    config = tmp_path / "g.json"
    config.write_text('{"num_parts": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(parts.PartitionError, match="nests more than 64 levels deep"):
        parts.load(config, 1, check_files=False)
    config.write_text(json.dumps({"num_parts": 1, "part-0": {"g": "part0/graph.dgl"}}))
    assert parts.load(config, 1, check_files=False).num_parts == 1


# -- a run's partitions.json --------------------------------------------------------------------


def test_odd_keys_in_a_runs_record_are_not_taken(tmp_path: Path) -> None:
    st = Storage(tmp_path, "job-1234abcd")
    st.prepare()
    path = st.run_dir / record.RECORD
    odd = {"²": "b" * 32, "٣": "c" * 32, "1" * 5000: "d" * 32, "-1": "e" * 32, " 5": "f" * 32}
    path.write_text(json.dumps({"keys": {**odd, "3": KEY}}))
    assert record.read(st) == record.RunPartitions({3: KEY}, {})
    for crafted in (
        json.dumps({"keys": [KEY], "size": [1]}),
        json.dumps({"keys": {"3": KEY}, "size": "big"}),
    ):
        path.write_text(crafted)
        assert record.read(st).size == {}
    path.write_text(json.dumps({"keys": [KEY]}))
    assert record.read(st) == record.RunPartitions()


@pytest.mark.parametrize(
    "crafted", [b"\xff\xfe not json", b"[1, 2]", nested(100_000).encode(), b"1" * 5000]
)
def test_an_unreadable_runs_record_is_no_record(
    tmp_path: Path, crafted: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    st = Storage(tmp_path, "job-1234abcd")
    st.prepare()
    path = st.run_dir / record.RECORD
    path.write_bytes(crafted)
    assert record.read(st) == record.RunPartitions()
    assert f"dglrun: warning: {path} " in capsys.readouterr().out
    # a write over it makes a record that is read
    assert record.write(st, {3: KEY}, None) == ""
    assert record.read(st).keys == {3: KEY}
    assert os.path.getsize(path) < 200
