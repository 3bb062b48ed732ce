"""The whole data plane with real DGL: dglrun's local transport runs 2 worker "pods" (network +
mount namespaces), partitions, dispatches and trains GraphSAGE with 1 server + 1 trainer each."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.examples.helpers import (
    DATASET,
    DGLRUN_GRAPH,
    EXAMPLE,
    Dgl,
    clean_env,
    dglrun,
    dglrun_argv,
)
from tests.support.paths import REPO
from tests.support.prerequisites import require

GRAPH = DGLRUN_GRAPH
CRASHER = Path(__file__).with_name("crash_train.py")


def dglrun_until_exit_after(
    mark: str, argv: list[str], env: dict[str, str], timeout: float = 300
) -> tuple[int, str, float | None]:
    """Run dglrun streaming its output: (exit code, output, seconds from the first line
    containing ``mark`` to dglrun's exit, or None if no line had it)."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={**clean_env(PYTHONPATH=str(REPO)), **env},
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    marked_at: float | None = None
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if marked_at is None and mark in line:
                marked_at = time.monotonic()
        code = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    took = None if marked_at is None else time.monotonic() - marked_at
    return code, "".join(lines), took


def dgl_processes() -> str:
    out = subprocess.run(
        ["pgrep", "-af", "train_dist.py|crash_train.py"], capture_output=True, text=True
    )
    return "\n".join(ln for ln in out.stdout.splitlines() if "pgrep" not in ln)


@pytest.fixture
def as_root() -> None:
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")


@pytest.fixture(scope="module")
def in_memory(
    dgl: Dgl, dataset_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """GraphSAGE through dglrun, features in memory: its workspace and the process."""
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")
    workspace = tmp_path_factory.mktemp("in_memory")
    return workspace, dglrun(dgl, workspace, dataset_root)


def test_graphsage_through_dglrun(
    dgl: Dgl,
    dataset_root: Path,
    single_sage: dict[str, Any],
    in_memory: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    tmp_path, proc = in_memory
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    for k, name in enumerate(["partition", "deliver", "dispatch", "configure", "train"], 1):
        assert f"[{k}/5] {name} done in" in out
    assert "[worker-1/trainer-0]" in out and "[worker-0/server-0]" in out
    metrics = json.loads((tmp_path / "output" / "metrics.json").read_text())
    acc, base = metrics["test_accuracy"], single_sage["test_accuracy"]
    assert metrics["world_size"] == 2 and metrics["num_parts"] == 2 and metrics["epochs"] == 2
    assert abs(acc - base) <= 0.02, f"distributed {acc:.4f} vs single-process {base:.4f}"
    assert acc >= 0.8  # make_dataset.py caps any model at ~0.91 (its --label-noise)
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("dglrun: done: partition") and f"test accuracy {acc:.4f}" in summary
    # partition contents: every node's features/labels equal the source graph's
    check = dgl.check(
        "partitions",
        "--config",
        str(tmp_path / "dataset" / f"{GRAPH}.json"),
        "--root",
        str(dataset_root),
        "--name",
        DATASET,
    )
    assert set(check["mismatches"].values()) == {0}, check["mismatches"]
    assert check["num_parts"] == 2 and check["covered_nodes"] == check["source_nodes"]
    assert check["orig_nids_is_permutation"]
    assert dgl_processes() == ""


def test_out_of_core_workers_train_the_same_losses_from_memory_mapped_features(
    dgl: Dgl,
    dataset_root: Path,
    in_memory: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    """The same job with --out-of-core: the partition's features also as .npy, the servers
    and trainers under outofcore's patch; same seed, so the same loss curve and accuracies
    as in memory (the servers' sampling is seeded too: both runs are deterministic)."""
    proc = dglrun(dgl, tmp_path, dataset_root, "--out-of-core", "--keep-local")
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "out-of-core: part 0: " in out and "out-of-core: part 1: " in out  # the export
    for i in (0, 1):  # each server mapped its part's files
        part = tmp_path / "workers" / f"worker-{i}" / "dgl_workspace" / "workload" / f"part{i}"
        assert f"[worker-{i}/server-0] out-of-core: part {i}: 5 node feature(s)" in out
        assert f"memory-mapped from {part}/node_feat_npy" in out
        assert (part / "node_feat_npy" / "index.json").is_file()
    mem = json.loads((in_memory[0] / "output" / "metrics.json").read_text())
    ooc = json.loads((tmp_path / "output" / "metrics.json").read_text())
    assert ooc["losses"] == mem["losses"], (ooc["losses"], mem["losses"])
    assert (ooc["test_accuracy"], ooc["val_accuracy"]) == (
        mem["test_accuracy"],
        mem["val_accuracy"],
    )
    assert "memory plan: skipped" in out or "out of core: structure" in out
    assert dgl_processes() == ""


def test_out_of_core_workers_reading_ahead_train_the_same_losses(
    dgl: Dgl,
    dataset_root: Path,
    in_memory: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    """Out of core with the servers not warming their files (``DGL_OUT_OF_CORE_WARM=0``):
    each minibatch's rows are read ahead as it is sampled, this machine's by the trainer and
    the other's by a WillNeedRequest to its server, and the loss curve is still the
    in-memory one. (With warming on, this graph's features are all in memory at once, and
    the previous test's run reads nothing ahead.)"""
    proc = dglrun(dgl, tmp_path, dataset_root, "--out-of-core", env={"DGL_OUT_OF_CORE_WARM": "0"})
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "out-of-core: warming" not in out
    for i in (0, 1):
        said = re.search(
            rf"\[worker-{i}/trainer-0\] out-of-core: read ahead (\d+) rows of this machine "
            r"for the minibatches sampled, and asked the other machines' servers for theirs "
            r"(\d+) times",
            out,
        )
        assert said and int(said[1]) > 0 and int(said[2]) > 0, out[-4000:]
    mem = json.loads((in_memory[0] / "output" / "metrics.json").read_text())
    ooc = json.loads((tmp_path / "output" / "metrics.json").read_text())
    assert ooc["losses"] == mem["losses"], (ooc["losses"], mem["losses"])
    assert dgl_processes() == ""


BUFFER_SAID = re.compile(
    r"\[worker-(\d)/trainer-0\] out-of-core: buffer order: (\d+) epoch\(s\), (\d+) buffer "
    r"states, (\d+) minibatches \((\d+) extra, to keep the trainers in step\), ([\d.]+) MiB "
    r"read in whole partitions \(waited [\d.]+s for them\), (\d+) of (\d+) input rows "
    r"outside the buffer"
)


def test_out_of_core_workers_in_buffer_order_train_within_a_point_of_memory(
    dgl: Dgl, dataset_root: Path, tmp_path: Path
) -> None:
    """Buffer order (MariusGNN's): 16 physical partitions per machine, a buffer of 7 (dglrun's
    from the plan's page cache share, half of the features, one partition of it kept for the
    next state's read); each epoch 10 states, each trainer's minibatches sampled inside every
    machine's buffer (no input row outside it), its partitions read whole, and after 4
    epochs the accuracy within a point of the in-memory run's. (After 2 it was 1.2 points
    below: the losses differ, sampled from half of the neighbours, and catch up.)"""
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")
    epochs = ("--num-epochs", "4")
    mem_proc = dglrun(dgl, tmp_path / "memory", dataset_root, *epochs)
    assert mem_proc.returncode == 0, mem_proc.stdout[-4000:] + mem_proc.stderr[-2000:]
    proc = dglrun(
        dgl,
        tmp_path / "buffer",
        dataset_root,
        *epochs,
        "--out-of-core",
        "--out-of-core-order",
        "Buffer",
        "--page-cache-fraction",
        "0.5",
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    said = {int(m[1]): [float(x) for x in m.groups()[1:]] for m in BUFFER_SAID.finditer(out)}
    assert sorted(said) == [0, 1], out[-4000:]
    for got, states, batches, _extra, read, outside, inputs in said.values():
        assert (got, states) == (4, 4 * 10), said
        assert batches > 0 and inputs > 0 and outside == 0, said
        assert read > 0, said
    assert (
        "buffer order: 16 physical partitions of 2 logical ones per machine, a buffer of 7" in out
    )
    # degree 10 and fan-out 10: each trainer warns that the buffer thins what a hop samples
    # from (the e2e job's graph, of degree 30, does not: e2e/test_memory.py)
    thin = "a node has 10.0 in-neighbours on average, 4.4 of them in the buffer (7 of 16"
    assert out.count(thin) == 2 and "sampler's fan-out is 10,10" in out, out[-4000:]
    mem = json.loads((tmp_path / "memory" / "output" / "metrics.json").read_text())
    buf = json.loads((tmp_path / "buffer" / "output" / "metrics.json").read_text())
    print(
        f"buffer order: test accuracy {buf['test_accuracy']:.4f}, in memory "
        f"{mem['test_accuracy']:.4f}; losses {buf['losses']} against {mem['losses']}; "
        f"per trainer (epochs, states, minibatches, extra, MiB, outside, inputs): {said}"
    )
    assert buf["losses"] != mem["losses"]  # (sampled from the buffer: not the same run)
    assert abs(buf["test_accuracy"] - mem["test_accuracy"]) <= 0.01, (buf, mem)
    assert dgl_processes() == ""


def test_single_process_baselines(
    dgl: Dgl, dataset_root: Path, single_sage: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "mlp.json"
    dgl.run(
        [
            EXAMPLE / "train_single.py",
            "--dataset",
            DATASET,
            "--dataset_root",
            dataset_root,
            "--model",
            "mlp",
            "--num_epochs",
            "20",
            "--batch_size",
            "256",
            "--out",
            out,
        ]
    )
    mlp = json.loads(out.read_text())["test_accuracy"]
    assert single_sage["test_accuracy"] - mlp >= 0.3, "the graph must carry the labels"


def test_a_trainer_dying_mid_training_stops_everything(
    dgl: Dgl, dataset_root: Path, tmp_path: Path, as_root: None
) -> None:
    args = ("--num-epochs", "200", "--train-entry-point", str(CRASHER))
    code, out, took = dglrun_until_exit_after(
        "crash_train: exiting with code 1",
        dglrun_argv(dgl, tmp_path, dataset_root, *args),
        {"CRASH_RANK": "1", "CRASH_AFTER_EPOCH": "1"},
    )
    assert code == 1, out[-3000:]
    assert took is not None, "the trainer did not reach its crash point"
    last = out.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: train failed: trainer 0 on worker-1"), last
    assert "exited with code 1" in last
    assert took < 30, f"dglrun exited {took:.1f}s after the trainer died"
    assert dgl_processes() == "", "DGL processes survived"


def test_graphsage_resumes_from_its_checkpoint_and_reuses_its_partitions(
    dgl: Dgl, dataset_root: Path, single_sage: dict[str, Any], tmp_path: Path, as_root: None
) -> None:
    """Runs on one storage, as a job and its restarts: the first trains 2 epochs and
    checkpoints each; the second (4 epochs) reuses the cached partitions, resumes after
    epoch 2 with the model and optimizer saved, and its model, read back from the storage by
    evaluate.py, scores what the run reported; a third, after the last epoch, trains nothing
    and evaluates the model it resumed."""
    storage = tmp_path / "storage"
    storage.mkdir()
    keep = ("--storage", str(storage), "--run-name", "sage-0123abcd")
    first = dglrun(dgl, tmp_path / "ws1", dataset_root, *keep)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    run = storage / "runs" / "sage-0123abcd"
    assert sorted(p.name for p in (run / "checkpoints").glob("*.pt")) == [
        "epoch-1.pt",
        "epoch-2.pt",
    ]
    args = ["--num-epochs", "4", *keep]
    again = dglrun(dgl, tmp_path / "ws2", dataset_root, *args)
    out = again.stdout
    assert again.returncode == 0, out[-4000:] + again.stderr[-2000:]
    assert "reused the partitions cached at partitions/" in out
    assert "[partition] ogbn-synth from" not in out  # the entry point did not run
    assert "resuming at epoch 2 of 4 from the checkpoint runs/sage-0123abcd/checkpoints/" in out
    assert "[rank 0] resumed from" in out and "2 epoch(s) were done" in out
    trained = out.rsplit("[5/5] train\n", 1)[-1]
    assert "[rank 0] epoch 2 loss" in trained and "[rank 0] epoch 1 loss" not in trained
    metrics = json.loads((run / "output" / "metrics.json").read_text())
    assert metrics["resumed_at_epoch"] == 2 and metrics["epochs"] == 4
    assert len(metrics["losses"]) == 4  # the first run's 2 losses came with the checkpoint
    assert metrics["test_accuracy"] >= single_sage["test_accuracy"] - 0.02
    evaluated = dgl.run(
        [EXAMPLE / "evaluate.py", "--results", run / "output", "--dataset", DATASET,
         "--dataset_root", dataset_root],
        env=clean_env(PYTHONPATH=str(REPO)),
    )  # fmt: skip
    doc = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert doc["split"] == "test_mask" and doc["nodes"] > 0
    assert abs(doc["accuracy"] - metrics["test_accuracy"]) <= 0.005, doc

    # a third run after the last epoch's checkpoint (a restart, or a grow asked too late):
    # nothing is trained again, and the model is evaluated, not reported as NaN
    third = dglrun(dgl, tmp_path / "ws3", dataset_root, *args)
    out = third.stdout
    assert third.returncode == 0, out[-4000:] + third.stderr[-2000:]
    assert "resuming at epoch 4 of 4" in out and "all 4 epochs were done" in out
    assert "[rank 0] epoch " not in out.rsplit("[5/5] train\n", 1)[-1]
    again_metrics = json.loads((run / "output" / "metrics.json").read_text())
    assert again_metrics["resumed_at_epoch"] == 4
    assert abs(again_metrics["test_accuracy"] - metrics["test_accuracy"]) <= 0.005
