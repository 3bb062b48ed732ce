"""The job's storage: checkpoints (the contract, choosing one, falling back), the partition
cache (its key, verification, damaged entries) and dglrun using both on the local transport,
run after run on the same folder as the restarts of a DGLJob would be (stand-in entry
points; the GraphSAGE example's own checkpoints are tested in tests/examples)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest

from launcher import checkpoints
from launcher.checksums import file_sha256
from launcher.options import Options, parse
from launcher.phases import partition_request
from launcher.plans.time import Estimate
from launcher.storage import cache, record
from launcher.storage.layout import Storage, StorageError
from podcontract import STORAGE_DIR
from tests.launcher.chunked_graph import write_graph
from tests.launcher.helpers import FIXTURES, dglrun

PART = str(FIXTURES / "fake_partition.py")
TRAIN = str(FIXTURES / "fake_train.py")


# -- checkpoints ----------------------------------------------------------------------------


def save(folder: Path, epoch: int, text: str = "") -> Path:
    with checkpoints.saving(folder, epoch) as tmp:
        tmp.write_text(text or f"after {epoch}")
    return folder / checkpoints.file_name(epoch)


def test_saving_commits_atomically_and_keeps_the_newest_two(tmp_path: Path) -> None:
    for n in (1, 2, 3):
        save(tmp_path, n)
    names = sorted(os.listdir(tmp_path))
    assert names == ["epoch-2.pt", "epoch-2.pt.sha256", "epoch-3.pt", "epoch-3.pt.sha256"]
    digest = (tmp_path / "epoch-3.pt.sha256").read_text().strip()
    assert digest == file_sha256(tmp_path / "epoch-3.pt")
    choice = checkpoints.choose(tmp_path, num_epochs=5)
    assert choice.resume == checkpoints.Checkpoint(3, tmp_path / "epoch-3.pt")
    assert choice.skipped == []


def test_a_failed_save_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), checkpoints.saving(tmp_path, 1) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert os.listdir(tmp_path) == []
    assert checkpoints.choose(tmp_path).resume is None


def test_a_truncated_checkpoint_falls_back_to_the_one_before(tmp_path: Path) -> None:
    save(tmp_path, 1)
    newest = save(tmp_path, 2, "x" * 1000)
    with newest.open("r+") as f:
        f.truncate(100)
    choice = checkpoints.choose(tmp_path)
    assert choice.resume is not None and choice.resume.epoch == 1
    assert choice.skipped == [
        "epoch-2.pt (100 bytes) does not match its SHA-256 in epoch-2.pt.sha256: truncated or "
        "overwritten"
    ]
    newest.with_name("epoch-1.pt").write_text("overwritten")
    none_left = checkpoints.choose(tmp_path)
    assert none_left.resume is None and len(none_left.skipped) == 2


def test_unfinished_and_out_of_range_checkpoints(tmp_path: Path) -> None:
    save(tmp_path, 1)
    (tmp_path / "epoch-2.pt").write_text("the trainer died while saving")  # no digest
    choice = checkpoints.choose(tmp_path)
    assert choice.resume is not None and choice.resume.epoch == 1 and choice.skipped == []
    save(tmp_path, 9)
    late = checkpoints.choose(tmp_path, num_epochs=4)
    assert late.resume is not None and late.resume.epoch == 1
    assert late.skipped == ["epoch-9.pt is past --num-epochs 4"]
    assert checkpoints.choose(tmp_path / "missing").resume is None


def test_saving_after_a_resume_drops_the_abandoned_timeline(tmp_path: Path) -> None:
    """Resumed at 1 after 2 and 3 were lost to corruption: saving 2 removes 3."""
    for n in (1, 2, 3):
        save(tmp_path, n)
    save(tmp_path, 2, "again")
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["epoch-2.pt"]
    assert (tmp_path / "epoch-2.pt").read_text() == "again"


# -- the partition cache ----------------------------------------------------------------------


def opts_for(tmp_path: Path, *extra: str, mode: str = "DGL-API") -> Options:
    args = ["-g", "g", "--num-partitions", "2", "--train-entry-point", TRAIN,
            "--transport", "local", "--partition-mode", mode, *extra]  # fmt: skip
    if mode == "DGL-API":
        args += ["--partition-entry-point", PART]
    return parse(args, env={})


def test_the_key_covers_arguments_content_and_run(tmp_path: Path) -> None:
    graph = tmp_path / "graph.bin"
    graph.write_bytes(b"edges")
    base = partition_request(opts_for(tmp_path, "--partition-inputs", str(graph)))
    key = cache.key_of(cache.inputs(base, "job-a", share=True))
    same = cache.key_of(cache.inputs(base, "job-b", share=True))
    assert key == same  # shared, and the graph is named: another job may reuse it
    mine = cache.inputs(base, "job-b", share=False)
    assert cache.key_of(mine) != key and mine["run"] == "job-b"
    other_args = partition_request(
        opts_for(tmp_path, "--partition-inputs", str(graph), "--balance-edges")
    )
    assert cache.key_of(cache.inputs(other_args, "job-a", True)) != key
    graph.write_bytes(b"other edges")
    assert cache.key_of(cache.inputs(base, "job-a", True)) != key
    # without the graph named, sharing cannot be trusted: the run stays in the key
    unnamed = cache.inputs(partition_request(opts_for(tmp_path)), "job-a", share=True)
    assert unnamed["run"] == "job-a"
    with pytest.raises(cache.CacheError, match="nope does not exist"):
        nope = partition_request(opts_for(tmp_path, "--partition-inputs", "nope"))
        cache.inputs(nope, "r", False)


def test_a_chunked_graphs_files_are_in_its_key(tmp_path: Path) -> None:
    path = write_graph(tmp_path / "g")
    what = partition_request(opts_for(tmp_path, "--chunked-graph", str(path), mode="ParMETIS"))
    doc = cache.inputs(what, "r", share=True)
    content = doc["content"]
    assert "run" not in doc and isinstance(content, dict) and len(content) >= 3
    key = cache.key_of(doc)
    chunk = next((tmp_path / "g").rglob("*.npy"))
    chunk.write_bytes(chunk.read_bytes()[:-1] + b"\x01")
    assert cache.key_of(cache.inputs(what, "r", share=True)) != key


def test_the_partition_seed_reaches_the_ranks_and_the_cache_key(tmp_path: Path) -> None:
    """--partition-seed: the ranks' --seed (PartitionJob's declaration writes it), and part
    of the cache's key; at its default neither changes (the keys cached before it stay)."""
    path = str(write_graph(tmp_path / "g"))
    plain = partition_request(opts_for(tmp_path, "--chunked-graph", path, mode="ParMETIS"))
    seeded = partition_request(
        opts_for(tmp_path, "--chunked-graph", path, "--partition-seed", "7", mode="ParMETIS")
    )
    assert (plain.job.seed, seeded.job.seed) == (0, 7)
    argv = dataclasses.replace(seeded.job, outs=("o",)).argv()
    assert argv[argv.index("--seed") + 1] == "7"
    assert "--seed" not in dataclasses.replace(plain.job, outs=("o",)).argv()
    doc, seeded_doc = (cache.inputs(w, "r", share=True) for w in (plain, seeded))
    assert "seed" not in doc and seeded_doc["seed"] == 7
    assert cache.key_of(doc) != cache.key_of(seeded_doc)
    with pytest.raises(SystemExit):  # (argparse: the error names the flag)
        opts_for(tmp_path, "--chunked-graph", path, "--partition-seed", "-1", mode="ParMETIS")


def test_an_elastic_runs_counts_are_asked_of_the_parmetis_modes_with_storage(
    tmp_path: Path,
) -> None:
    path = str(write_graph(tmp_path / "g"))
    storage = ("--storage", str(tmp_path), "--partition-counts", "2-4")
    for mode in ("ParMETIS", "DistParMETIS"):
        what = partition_request(opts_for(tmp_path, "--chunked-graph", path, *storage, mode=mode))
        assert what.job.every_count() == (2, 3, 4)  # (--num-partitions 2 first)
        assert dataclasses.replace(what.job, outs=("o",)).argv()[-3:] == ["--counts", "3", "4"]
    # DGL-API's entry point partitions into one count: the others are its attempts' own
    assert partition_request(opts_for(tmp_path, *storage)).job.counts == ()
    with pytest.raises(SystemExit):  # (argparse: the error names the flag)
        opts_for(tmp_path, "--partition-counts", "2-3", mode="ParMETIS")
    for bad in ("3-2", "0-2", "two", "2-"):
        with pytest.raises(SystemExit):
            opts_for(tmp_path, *storage[:2], "--partition-counts", bad, mode="ParMETIS")


def test_a_runs_record_names_cache_entries_only(tmp_path: Path) -> None:
    """runs/<run>/partitions.json: keys of 32 hex digits by count, and whole sizes; anything
    else in it is ignored (a key is a folder of the cache: nothing can name another path)."""
    st = Storage(tmp_path, "job-1234abcd")
    st.prepare()
    assert record.read(st) == record.RunPartitions()
    size = {"nodes": 10, "edges": 20, "node_bytes": 4, "edge_bytes": 0}
    assert record.write(st, {3: "a" * 32}, size) == ""
    assert record.write(st, {2: "b" * 32}, None) == ""
    got = record.read(st)
    assert got.keys == {2: "b" * 32, 3: "a" * 32} and got.size == size
    record.forget(st, 3)
    assert record.read(st).keys == {2: "b" * 32}
    doc = {"keys": {"2": "../../etc", "3": "A" * 32, "x": "c" * 32, "4": "d" * 32},
           "size": {"nodes": -1, "edges": "2"}}  # fmt: skip
    (st.run_dir / record.RECORD).write_text(json.dumps(doc))
    assert record.read(st) == record.RunPartitions({4: "d" * 32}, {})
    (st.run_dir / record.RECORD).write_text("[1, 2")
    assert record.read(st) == record.RunPartitions()


# -- dglrun on the local transport ----------------------------------------------------------


def local(ws: Path, storage: Path, *extra: str) -> list[str]:
    return ["--transport", "local", "-g", "g", "--num-partitions", "2", "--workspace", str(ws),
            "--partition-entry-point", PART, "--train-entry-point", TRAIN, "--num-epochs", "4",
            "--storage", str(storage), "--run-name", "job-1234abcd", *extra]  # fmt: skip


def entries(storage: Path) -> list[Path]:
    return [p for p in (storage / "partitions").iterdir() if not p.name.startswith(".")]


def test_partitions_are_cached_reused_and_rebuilt_when_damaged(
    tmp_path: Path, no_leftovers: None
) -> None:
    storage = tmp_path / "storage"
    storage.mkdir()
    first = dglrun(*local(tmp_path / "ws1", storage))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no cached partitions for these inputs" in first.stdout
    (entry,) = entries(storage)
    index = json.loads((entry / cache.INDEX).read_text())
    assert index["inputs"]["run"] == "job-1234abcd" and "part1/graph.dgl" in index["files"]
    run = storage / "runs" / "job-1234abcd"
    assert json.loads((run / "output" / "metrics.json").read_text())["test_accuracy"] == 0.5
    summary = json.loads((run / "output" / "dglrun.json").read_text())
    assert summary["outcome"] == "succeeded" and summary["metrics"]["world_size"] == 2
    assert any("[5/5] train done" in p.read_text() for p in (run / "logs").iterdir())

    again = dglrun(*local(tmp_path / "ws2", storage))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"reused the partitions cached at partitions/{entry.name}" in again.stdout
    assert "partitioned into" not in again.stdout  # the entry point did not run
    assert "every file's SHA-256 verified" in again.stdout

    damaged = entry / "part1" / "graph.dgl"
    damaged.write_bytes(damaged.read_bytes()[:-10])
    third = dglrun(*local(tmp_path / "ws3", storage))
    assert third.returncode == 0, third.stdout + third.stderr
    assert (
        f"warning: the cached partitions are damaged: {damaged} does not match its SHA-256 in "
        ".dglrun-cache.json" in third.stdout
    ), third.stdout
    assert "partitioned into 2 parts" in third.stdout
    (rebuilt,) = entries(storage)
    assert rebuilt.name == entry.name and len((rebuilt / "part1" / "graph.dgl").read_bytes()) > 0


def test_a_restart_resumes_from_the_last_whole_checkpoint(
    tmp_path: Path, no_leftovers: None
) -> None:
    storage = tmp_path / "storage"
    storage.mkdir()
    lost = dglrun(*local(tmp_path / "ws1", storage), env={"FAKE_FAIL_EPOCH": "2"})
    assert lost.returncode == 1, lost.stdout + lost.stderr
    folder = storage / "runs" / "job-1234abcd" / "checkpoints"
    saved = sorted(p.name for p in folder.glob("*.pt"))
    assert saved == ["epoch-2.pt", "epoch-3.pt"], lost.stdout
    assert json.loads((folder.parent / "output" / "dglrun.json").read_text())["outcome"] == "failed"
    # the newest checkpoint is damaged: the restart falls back to the one before
    with (folder / "epoch-3.pt").open("r+") as f:
        f.truncate(3)
    restart = dglrun(*local(tmp_path / "ws2", storage))
    assert restart.returncode == 0, restart.stdout + restart.stderr
    out = restart.stdout
    assert "reused the partitions cached at" in out
    assert (
        "warning: checkpoint epoch-3.pt (3 bytes) does not match its SHA-256 in "
        "epoch-3.pt.sha256: truncated or overwritten: resuming from epoch-2.pt" in out
    ), out
    assert (
        "resuming at epoch 2 of 4 from the checkpoint runs/job-1234abcd/checkpoints/epoch-2.pt"
        in (out)
    )
    assert "trainer rank 0 resumed after 2 epochs (state after 2 epochs)" in out
    assert "trainer rank 1 resumed after 2 epochs (state after 2 epochs)" in out
    assert "Epoch 00001" not in out.rsplit("[5/5] train\n", 1)[-1]
    metrics = json.loads((folder.parent / "output" / "metrics.json").read_text())
    assert metrics["started_at_epoch"] == 2


def test_a_planted_checkpoint_is_refused_and_dglrun_ends_quoting_the_refusal(
    tmp_path: Path, no_leftovers: None
) -> None:
    """Every kept checkpoint overwritten with a payload, and its digest with the payload's (as
    anybody who can write the claim can): dglrun resumes from the newest, every trainer
    refuses it naming the file (REFUSED_EXIT_CODE), and dglrun's last line (the pod's
    termination message, which the operator turns into FileRefused) starts ``refused: `` and
    quotes the refusal. The twin: the same files well-formed again are resumed from."""
    storage = tmp_path / "storage"
    storage.mkdir()
    lost = dglrun(*local(tmp_path / "ws1", storage), env={"FAKE_FAIL_EPOCH": "2"})
    assert lost.returncode == 1, lost.stdout + lost.stderr
    folder = storage / "runs" / "job-1234abcd" / "checkpoints"
    kept = sorted(folder.glob("epoch-*.pt"))
    assert [p.name for p in kept] == ["epoch-2.pt", "epoch-3.pt"]
    for path in kept:
        path.write_bytes(b"\x80\x04\x95payload: cposix\nsystem\n")
        path.with_name(path.name + checkpoints.DIGEST).write_text(file_sha256(path) + "\n")
    refused = dglrun(*local(tmp_path / "ws2", storage))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    out = refused.stdout
    assert "resuming at epoch 3 of 4 from the checkpoint runs/job-1234abcd/checkpoints/" in out
    last = out.strip().splitlines()[-1]
    newest = folder / "epoch-3.pt"
    assert re.match(
        rf"dglrun: error: refused: fake_train.py: error: \[rank [01]\] checkpoint {newest} is "
        r"refused: it holds more than a state \('.+'\) \(trainer 0 on worker-[01] "
        r"\(10\.\d+\.\d+\.\d+\) exited with code 65: it refused a file it was to load, and "
        r"would refuse it again on a restart\); stopped every DGL process on every worker$",
        last,
    ), last
    assert "Traceback" not in out + refused.stderr
    summary = json.loads((folder.parent / "output" / "dglrun.json").read_text())
    assert summary["outcome"] == "failed" and summary["summary"].startswith("refused: "), summary
    for path in kept:  # the twin: well-formed, the same checkpoints are resumed from
        with checkpoints.saving(folder, int(path.stem.split("-")[1])) as tmp:
            tmp.write_text(f"state after {path.stem.split('-')[1]} epochs")
    resumed = dglrun(*local(tmp_path / "ws3", storage))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "trainer rank 0 resumed after 3 epochs (state after 3 epochs)" in resumed.stdout


def test_storage_that_cannot_be_used_is_named(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        Storage(tmp_path / "nope", "r").prepare()
    proc = dglrun(*local(tmp_path / "ws", tmp_path / "nope"))
    assert proc.returncode == 1
    assert "dglrun: error: the storage" in proc.stdout and "does not exist" in proc.stdout
    bad = dglrun(*local(tmp_path / "ws", tmp_path, "--run-name", "../up"))
    assert bad.returncode == 2 and "--run-name: '../up' is not a run name" in bad.stderr


def test_storage_the_pods_user_cannot_write_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(root writes anywhere: the check is what a non-root pod user would meet)"""
    monkeypatch.setattr(os, "access", lambda *_: False)
    monkeypatch.setattr(os, "getuid", lambda: 65532)
    with pytest.raises(StorageError) as caught:
        Storage(tmp_path, "r").prepare()
    assert str(caught.value).startswith(
        f"the storage folder {tmp_path}/runs/r/output cannot be written by this pod's user "
        "(uid 65532): Permission denied; give the claim's root folder to that user"
    ), caught.value


# -- spec.storage.path: folders made on the claim (issue 26) --------------------------------


def claim_root(tmp_path: Path, mode: int = 0o755) -> Path:
    """A folder standing for the claim's mount point (``/dgl_storage`` in a pod)."""
    mount = tmp_path / "dgl_storage"
    mount.mkdir()
    mount.chmod(mode)
    return mount


def modes(top: Path) -> dict[str, int]:
    return {p.relative_to(top).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in top.rglob("*")}


def contents(top: Path) -> dict[str, tuple[int, bytes | None, float | None]]:
    """Every entry below ``top``: its mode, and a file's bytes and mtime (a folder's mtime
    moves with what is added in it)."""
    out: dict[str, tuple[int, bytes | None, float | None]] = {}
    for p in top.rglob("*"):
        mode = stat.S_IMODE(p.stat().st_mode)
        kept = (p.read_bytes(), p.stat().st_mtime) if p.is_file() else (None, None)
        out[p.relative_to(top).as_posix()] = (mode, *kept)
    return out


def test_the_path_is_made_on_a_fresh_claim_writable_as_its_root(tmp_path: Path) -> None:
    """A new claim is empty: the path's folders are made, with the root's permissions (an
    fsGroup's group-writable setgid root here), not what this pod's umask would give."""
    mount = claim_root(tmp_path, 0o2775)
    storage = Storage(mount / "team-a" / "g", "r", mount=mount)
    old = os.umask(0o022)
    try:
        storage.prepare()
    finally:
        os.umask(old)
    made = modes(mount)
    assert sorted(made) == [
        "team-a", "team-a/g", "team-a/g/partitions", "team-a/g/runs", "team-a/g/runs/r",
        "team-a/g/runs/r/checkpoints", "team-a/g/runs/r/logs", "team-a/g/runs/r/output",
    ]  # fmt: skip
    assert set(made.values()) == {0o2775}, made


def test_the_path_is_made_on_an_existing_claim_and_nothing_there_changes(
    tmp_path: Path,
) -> None:
    """spec.storage.claimName: a claim with other teams' files and an earlier run of this
    path's own; only folders that were missing are made, each as open as its parent."""
    mount = claim_root(tmp_path)
    (mount / "runs" / "old-1234abcd" / "output").mkdir(parents=True)
    (mount / "runs" / "old-1234abcd" / "output" / "model.pt").write_bytes(b"weights")
    (mount / "team-b").mkdir(mode=0o700)
    (mount / "team-b" / "notes.txt").write_text("mine")
    (mount / "team-b" / "notes.txt").chmod(0o600)
    (mount / "team-a").mkdir()
    (mount / "team-a").chmod(0o750)
    (mount / "team-a" / "partitions").mkdir()
    (mount / "team-a" / "partitions" / "kept.bin").write_bytes(b"part")
    before = contents(mount)
    Storage(mount / "team-a" / "g", "r", mount=mount).prepare()
    after = contents(mount)
    assert {k: after[k] for k in before} == before  # every old entry as it was
    new = {k: mode for k, (mode, _, _) in after.items() if k not in before}
    assert new["team-a/g"] == 0o750 and new["team-a/g/runs/r/output"] == 0o750, new
    # the same path again (a restart, the launcher after the partitioner): nothing changes
    Storage(mount / "team-a" / "g", "r", mount=mount).prepare()
    assert contents(mount) == after


def test_a_missing_claim_mount_is_named_and_nothing_is_made(tmp_path: Path) -> None:
    """The claim not mounted: the path is not made in the container's own filesystem."""
    mount = tmp_path / "dgl_storage"
    with pytest.raises(StorageError) as caught:
        Storage(mount / "team-a", "r", mount=mount).prepare()
    assert str(caught.value) == (
        f"the storage {mount} does not exist (in a DGLJob: spec.storage's claim is mounted "
        f"there; {mount}/team-a is made in it)"
    )
    assert not mount.exists()


def test_a_file_in_the_way_and_an_unwritable_root_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount = claim_root(tmp_path)
    (mount / "team-a").write_text("not a folder")
    with pytest.raises(StorageError, match="team-a cannot be made: a file of that name is in"):
        Storage(mount / "team-a" / "g", "r", mount=mount).prepare()
    assert (mount / "team-a").read_text() == "not a folder"

    def refused(self: Path, *args: object, **kw: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refused)  # (root writes anywhere)
    monkeypatch.setattr(os, "getuid", lambda: 65532)
    with pytest.raises(StorageError) as caught:
        Storage(mount / "team-b", "r", mount=mount).prepare()
    assert str(caught.value).startswith(
        f"the storage folder {mount}/team-b cannot be written by this pod's user (uid 65532): "
        "Permission denied; give the claim's root folder to that user"
    ), caught.value


def test_a_folder_another_pod_made_meanwhile_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partitioner and the launcher (or a restart) may make the same folder at once."""
    mount = claim_root(tmp_path)
    real = Path.mkdir

    def beaten(self: Path, *args: object, **kw: object) -> None:
        os.mkdir(self, 0o700)  # the other pod's, just before ours
        real(self)

    monkeypatch.setattr(Path, "mkdir", beaten)
    Storage(mount / "team-a", "r", mount=mount).prepare()
    assert (mount / "team-a" / "runs" / "r" / "output").is_dir()
    assert modes(mount)["team-a"] == 0o700  # (not ours: left as the other pod made it)


def test_dglrun_requires_the_claims_mount_and_makes_the_path_under_it(tmp_path: Path) -> None:
    def storage_of(folder: str) -> Storage | None:
        return opts_for(tmp_path, "--storage", folder, "--run-name", "r").storage

    assert (s := storage_of(f"{STORAGE_DIR}/team-a/g")) and s.mount == Path(STORAGE_DIR)
    assert (s := storage_of(STORAGE_DIR)) and s.mount == Path(STORAGE_DIR)
    assert (s := storage_of(str(tmp_path))) and s.mount is None  # (--storage: must exist)
    assert (s := storage_of(f"{STORAGE_DIR}/../etc")) and s.mount is None
    with pytest.raises(ValueError, match="is not inside"):
        Storage(Path("/elsewhere"), "r", mount=Path(STORAGE_DIR))


def test_another_run_reuses_shared_partitions_only_with_the_graph_named(
    tmp_path: Path, no_leftovers: None
) -> None:
    storage = tmp_path / "storage"
    storage.mkdir()
    graph = tmp_path / "graph.bin"
    graph.write_bytes(b"the graph the entry point reads")
    shared = ("--share-partitions", "--partition-inputs", str(graph))
    first = dglrun(*local(tmp_path / "a", storage, "--run-name", "a-1", *shared))
    assert first.returncode == 0, first.stdout + first.stderr
    other = dglrun(*local(tmp_path / "b", storage, "--run-name", "b-2", *shared))
    assert other.returncode == 0, other.stdout + other.stderr
    assert "reused the partitions cached at partitions/" in other.stdout
    assert "and any job with the same inputs" in first.stdout
    unnamed = dglrun(*local(tmp_path / "c", storage, "--run-name", "c-3", "--share-partitions"))
    assert unnamed.returncode == 0, unnamed.stdout + unnamed.stderr
    assert "warning: --share-partitions: name the graph the partition entry point reads" in (
        unnamed.stdout
    )
    assert "reused the partitions" not in unnamed.stdout
    assert len(entries(storage)) == 2  # (the shared entry, and c-3's own)


class Recorded:
    """A Progress that keeps what dglrun records and the Events it sends."""

    def __init__(self) -> None:
        self.fields: dict[str, object] = {}
        self.events: list[tuple[str, str, str]] = []

    def phase(self, k: int, total: int, name: str) -> None: ...

    def output(self, label: str, text: str) -> None: ...

    def record(self, field: str, value: object) -> None:
        self.fields[field] = value

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def expect(self, plan: Estimate) -> None: ...

    def finish(self, outcome: str | None) -> None: ...


def test_resuming_and_skipping_are_reported_in_status_and_events(tmp_path: Path) -> None:
    from launcher.console import Console
    from launcher.storage import keeping

    opts = opts_for(tmp_path, "--storage", str(tmp_path), "--run-name", "r", "--num-epochs", "4")
    assert opts.storage is not None
    opts.storage.prepare()
    save(opts.storage.checkpoints, 1)
    save(opts.storage.checkpoints, 2).write_text("overwritten")
    progress = Recorded()
    console = Console(write=lambda _: None, progress=progress)
    env = keeping.trainer_env(opts.storage, opts.training.num_epochs, console)
    assert env["DGLRUN_RESUME_EPOCH"] == "1" and env["DGLRUN_RESUME_FROM"].endswith("epoch-1.pt")
    assert env["DGLRUN_OUTPUT_DIR"] == str(tmp_path / "runs" / "r" / "output")
    assert progress.fields["resume"] == {"epoch": 1, "checkpoint": "runs/r/checkpoints/epoch-1.pt"}
    (kind, reason, message), resuming = progress.events
    assert (kind, reason) == ("Warning", "CheckpointSkipped")
    assert message.startswith("Checkpoint epoch-2.pt (11 bytes) does not match its SHA-256")
    assert message.endswith(": resuming from epoch-1.pt")
    assert resuming == (
        "Normal",
        "Resuming",
        "Resuming at epoch 1 of 4 from the checkpoint runs/r/checkpoints/epoch-1.pt",
    )


def test_the_cache_keeps_the_most_recently_used_counts_of_a_graph(tmp_path: Path) -> None:
    """An elastic job partitions one graph into several counts: the newest KEEP_COUNTS of them
    stay, the least recently used go; another graph's entries are never touched."""
    c = cache.Cache(tmp_path)
    base = {"format": cache.FORMAT, "mode": "DGL-API", "graph_name": "g", "run": "r"}

    def entry(count: int, used: float, graph: str = "g") -> str:
        doc = {**base, "graph_name": graph, "num_partitions": count}
        key = cache.key_of(doc)
        (tmp_path / key).mkdir()
        index = tmp_path / key / cache.INDEX
        index.write_text(json.dumps({"key": key, "inputs": doc, "files": {}}))
        os.utime(index, (used, used))
        return key

    keys = {n: entry(n, 1000.0 + n) for n in (1, 2, 3)}
    other = entry(1, 10.0, graph="h")  # older than all, but another graph
    doc = {**base, "num_partitions": 4}
    keys[4] = cache.key_of(doc)
    (tmp_path / keys[4]).mkdir()
    (tmp_path / keys[4] / cache.INDEX).write_text(json.dumps({"inputs": doc}))
    gone = c.evict(keys[4], doc)
    assert gone == [f"{keys[1]} (1 partitions): the least recently used"]
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {keys[2], keys[3], keys[4], other}
    # count 2 used again: now 3 is the least recently used of the three that stay... once a
    # fourth count comes
    assert c.evict(keys[2], {**base, "num_partitions": 2}) == []
    keys[5] = entry(5, 5000.0)
    gone = c.evict(keys[5], {**base, "num_partitions": 5})
    assert gone == [f"{keys[3]} (3 partitions): the least recently used"]


# -- a planted cache entry: nothing it names is read or written outside it ---------------------


def planted_entry(root: Path, files: dict[str, str]) -> Path:
    """A committed-looking entry of a one-part set; its index also lists ``files`` (name ->
    content, with a made-up digest)."""
    entry = root / "partitions" / "k"
    (entry / "part0").mkdir(parents=True)
    config = {"graph_name": "g", "num_parts": 1, "part-0": {"part_graph": "part0/graph.dgl"}}
    (entry / "g.json").write_text(json.dumps(config))
    (entry / "part0" / "graph.dgl").write_text("graph")
    listed = {"g.json": (entry / "g.json"), "part0/graph.dgl": entry / "part0" / "graph.dgl"}
    index = {rel: [p.stat().st_size, file_sha256(p)] for rel, p in listed.items()}
    for rel, text in files.items():
        index[rel] = [len(text), "0" * 64]
    (entry / cache.INDEX).write_text(json.dumps({"key": "k", "inputs": {}, "files": index}))
    return entry


@pytest.mark.parametrize(
    ("name", "why"),
    [("part0/../../escaped.txt", "a name with '..'"), ("/absolute.txt", "an absolute name")],
)
def test_an_index_naming_a_file_outside_its_entry_is_refused(
    tmp_path: Path, name: str, why: str
) -> None:
    """The name resolves to a planted file beside the entry (or anywhere, absolute), and
    copied as named it would land outside the worker's folder: refused, nothing written."""
    entry = planted_entry(tmp_path, {})
    if name.startswith("/"):
        name = str(tmp_path / "absolute.txt")
        planted = Path(name)
    else:
        planted = entry / name
    planted.write_text("planted")
    index = json.loads((entry / cache.INDEX).read_text())
    index["files"][name] = [len("planted"), file_sha256(planted)]
    (entry / cache.INDEX).write_text(json.dumps(index))
    dest = tmp_path / "worker" / "workload"
    with pytest.raises(cache.UnsafeIndex, match=f"names '{re.escape(name)}', {why}: refused"):
        cache.place(entry, "g.json", 0, dest)
    assert cache.main(["place", str(entry), str(dest), "--config", "g.json", "--part", "0"]) == 1
    # nothing was written: not in the worker's folder, not where the name points from it
    assert not dest.exists()
    assert not (tmp_path / "worker" / "escaped.txt").exists()
    assert planted.read_text() == "planted"
    # lookup (the launcher's side) drops the entry and says why
    found = cache.Cache(entry.parent).lookup("k", "g", 1)
    assert found.pset is None and f"names '{name}', {why}" in found.problem
    assert not entry.exists()


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_symbolic_link_in_an_entry_is_refused(tmp_path: Path, where: str) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "graph.dgl").write_text("another tenant's partition")
    entry = planted_entry(tmp_path, {})
    if where == "file":  # the part's file is a link to a file outside the entry
        (entry / "part0" / "graph.dgl").unlink()
        (entry / "part0" / "graph.dgl").symlink_to(secret / "graph.dgl")
    else:  # the part's folder is a link to a folder outside the entry
        shutil.rmtree(entry / "part0")
        (entry / "part0").symlink_to(secret, target_is_directory=True)
    index = json.loads((entry / cache.INDEX).read_text())
    index["files"]["part0/graph.dgl"] = [
        len("another tenant's partition"),
        file_sha256(secret / "graph.dgl"),
    ]  # the index agrees with what the link shows: only the link gives it away
    (entry / cache.INDEX).write_text(json.dumps(index))
    dest = tmp_path / "worker" / "workload"
    with pytest.raises(cache.CacheError, match="a symbolic link on the way"):
        cache.place(entry, "g.json", 0, dest)
    assert not (dest / "part0" / "graph.dgl").exists()
    found = cache.Cache(entry.parent).lookup("k", "g", 1)
    assert found.pset is None and "is a symbolic link" in found.problem
    assert (secret / "graph.dgl").read_text() == "another tenant's partition"  # untouched
