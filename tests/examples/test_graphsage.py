"""The GraphSAGE example end to end, with the DGL interpreter: synthetic ogb dataset ->
partitions -> single-process baseline vs features-only MLP -> a 1-machine distributed run
(1 DGL server + 1 trainer on 127.0.0.1, with dglrun's process environment)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from localcluster.ports import free_port
from tests.examples.helpers import (
    BATCH,
    DATASET,
    EPOCHS,
    EXAMPLE,
    FEAT_DIM,
    GRAPH,
    NUM_CLASSES,
    NUM_NODES,
    SEED,
    Arg,
    Dgl,
    clean_env,
    partition,
)

SPLITS = [12000, 4000, 4000]  # make_dataset.py's default 60/20/20
DATASET_DIR = "ogbn_synth"


# -- dataset --------------------------------------------------------------------------------


def test_dataset_has_ogbs_layout_and_loads_through_ogb(dgl: Dgl, dataset_root: Path) -> None:
    d = dataset_root / DATASET_DIR
    for rel in (
        "RELEASE_v1.txt",
        "meta.json",
        "raw/edge.csv.gz",
        "raw/num-node-list.csv.gz",
        "raw/num-edge-list.csv.gz",
        "raw/node-feat.csv.gz",
        "raw/node-label.csv.gz",
        "split/random/train.csv.gz",
        "split/random/valid.csv.gz",
        "split/random/test.csv.gz",
    ):
        assert (d / rel).is_file(), rel
    info = dgl.check("dataset", "--root", str(dataset_root), "--name", DATASET)
    assert info["loader"] == "ogb.nodeproppred.dataset_dgl.DglNodePropPredDataset"
    assert info["num_nodes"] == NUM_NODES
    assert info["num_edges"] == NUM_NODES * 10  # avg degree 10, inverse edges added by ogb
    assert info["feat_shape"] == [NUM_NODES, FEAT_DIM]
    assert info["feat_dtype"] == "torch.float32"
    assert info["label_shape"] == [NUM_NODES]
    assert info["label_dtype"] == "torch.int64"
    assert (info["label_min"], info["label_max"]) == (0, NUM_CLASSES - 1)
    assert info["num_classes"] == NUM_CLASSES
    assert info["split_sizes"] == SPLITS
    assert info["split_overlap"] == 0
    assert info["self_loops"] == 0
    assert info["reverse_edges_missing"] == 0
    # ogb cached its processed graph next to the raw files: proof its own loader ran.
    assert (d / "processed" / "dgl_data_processed").is_file()


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "processed" not in p.relative_to(root).parts
    }


def test_dataset_is_deterministic_for_a_seed(dgl: Dgl, dataset_root: Path, tmp_path: Path) -> None:
    def make(root: Path, seed: int) -> dict[str, bytes]:
        args: list[Arg] = ["--root", root, "--num-nodes", NUM_NODES, "--num-classes", NUM_CLASSES]
        dgl.run([EXAMPLE / "make_dataset.py", *args, "--feat-dim", FEAT_DIM, "--seed", seed])
        return _files(root / DATASET_DIR)

    again = make(tmp_path / "again", SEED)
    assert again == _files(dataset_root / DATASET_DIR)  # byte for byte
    other = make(tmp_path / "other", SEED + 1)
    assert other.keys() == again.keys()
    for name in ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "split/random/train.csv.gz"):
        assert other[name] != again[name], name


def test_an_ogb_named_dataset_uses_ogbs_own_meta(
    dgl: Dgl, dataset_root: Path, tmp_path: Path
) -> None:
    """load_ogb_graph treats ogb's names (here ogbn-arxiv) with ogb's master.csv meta: the same
    files, laid out like arxiv's download, load with arxiv's 40 classes, its 'time' split,
    its node_year file, and its directed edges made bidirected."""
    arxiv = tmp_path / "ogbn_arxiv"
    shutil.copytree(dataset_root / DATASET_DIR, arxiv, ignore=shutil.ignore_patterns("processed"))
    (arxiv / "meta.json").unlink()
    (arxiv / "split" / "random").rename(arxiv / "split" / "time")
    shutil.copy(arxiv / "raw" / "node-label.csv.gz", arxiv / "raw" / "node_year.csv.gz")
    info = dgl.check("dataset", "--root", str(tmp_path), "--name", "ogbn-arxiv")
    assert info["num_classes"] == 40
    assert info["num_nodes"] == NUM_NODES
    assert info["num_edges"] == NUM_NODES * 10  # edge.csv.gz lists each edge once
    assert info["reverse_edges_missing"] == 0
    assert info["split_sizes"] == SPLITS


# Run with the DGL interpreter: a pickle whose unpickling runs os.system("touch <marker>"),
# saved the way each file is written: torch.save (split_dict.pt), pickle.dump (others).
PLANT = """
import os, pickle, sys, torch

class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[3],))

if sys.argv[1] == "torch":
    torch.save({"train": Payload(), "valid": Payload(), "test": Payload()}, sys.argv[2])
else:
    with open(sys.argv[2], "wb") as f:
        pickle.dump(Payload(), f)
"""

# Loads a dataset through the example's loader; prints its split and masks, or its error.
LOAD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import common
try:
    ds = common.load_ogb_dataset(sys.argv[2], sys.argv[3])
    g, _ = common.load_ogb_graph(sys.argv[2], sys.argv[3])
except common.DatasetError as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(0)
split = common.read_split(ds, g.num_nodes())
masks = {k: g.ndata[k].nonzero()[:, 0].tolist() for k in ("train_mask", "val_mask", "test_mask")}
print(json.dumps({"split": {k: v.tolist() for k, v in split.items()}, "masks": masks}))
"""

TINY: list[Arg] = ["--num-nodes", 200, "--avg-degree", 4, "--num-classes", 4, "--feat-dim", 4]


def _tiny(dgl: Dgl, root: Path, *extra: Arg) -> Path:
    """A 200-node dataset written by make_dataset.py under ``root``; returns its folder."""
    dgl.run([EXAMPLE / "make_dataset.py", "--root", root, *TINY, "--seed", SEED, *extra])
    return root / DATASET_DIR


def _plant(dgl: Dgl, tmp_path: Path, how: str, path: Path, marker: Path) -> None:
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    path.parent.mkdir(parents=True, exist_ok=True)
    dgl.run([script, how, path, marker])
    assert path.is_file() and not marker.exists()


def _load(dgl: Dgl, root: Path) -> dict[str, Any]:
    out = dgl.run(["-c", LOAD, EXAMPLE, DATASET, root]).stdout.strip().splitlines()
    result = json.loads(out[-1])
    assert isinstance(result, dict)
    return result


def _csv_ids(path: Path) -> list[int]:
    with gzip.open(path, "rt") as f:
        return [int(line) for line in f if line.strip()]


def test_a_planted_split_dict_is_not_read(dgl: Dgl, tmp_path: Path) -> None:
    """A split_dict.pt beside the CSV split (the file ogb's get_idx_split torch.loads first,
    unpickling it) carrying a payload: the example reads the CSV files, and the payload never
    runs. The same file through ogb's get_idx_split does run it: the attack is real."""
    d = _tiny(dgl, tmp_path / "data")
    split_dir = d / "split" / "random"
    marker = tmp_path / "ran"
    _plant(dgl, tmp_path, "torch", split_dir / "split_dict.pt", marker)

    got = _load(dgl, tmp_path / "data")
    assert not marker.exists(), "the payload ran"
    want = {p: _csv_ids(split_dir / f"{p}.csv.gz") for p in ("train", "valid", "test")}
    assert [len(v) for v in want.values()] == [120, 40, 40]
    assert got["split"] == want
    assert got["masks"] == {
        "train_mask": sorted(want["train"]),
        "val_mask": sorted(want["valid"]),
        "test_mask": sorted(want["test"]),
    }

    ogb = (
        "import sys; sys.path.insert(0, sys.argv[1]); import common; "
        "common.load_ogb_dataset(sys.argv[2], sys.argv[3]).get_idx_split()"
    )
    dgl.run(["-c", ogb, EXAMPLE, DATASET, tmp_path / "data"])
    assert marker.exists(), "ogb's get_idx_split should run the planted payload"


def test_a_split_without_its_csv_files_is_an_error_naming_the_file(
    dgl: Dgl, tmp_path: Path
) -> None:
    """split_dict.pt alone (as ogb's DatasetSaver writes a split) is not read either: the
    missing CSV file is named, with a word on why the pickle beside it is ignored."""
    d = _tiny(dgl, tmp_path / "data")
    split_dir = d / "split" / "random"
    marker = tmp_path / "ran"
    (split_dir / "valid.csv.gz").unlink()
    _plant(dgl, tmp_path, "torch", split_dir / "split_dict.pt", marker)
    got = _load(dgl, tmp_path / "data")
    assert got == {
        "error": f"dataset {DATASET}: {split_dir / 'valid.csv.gz'} is missing "
        "(its split_dict.pt is not read: a pickle)"
    }
    assert not marker.exists(), "the payload ran"
    with gzip.open(split_dir / "valid.csv.gz", "wt") as f:
        f.write("1\n200\n")  # node 200 of 0..199
    assert _load(dgl, tmp_path / "data") == {
        "error": f"dataset {DATASET}: {split_dir / 'valid.csv.gz'} names node 200, outside 0..199"
    }
    with gzip.open(split_dir / "valid.csv.gz", "wt") as f:
        f.write("1\nx\n")
    error = _load(dgl, tmp_path / "data")["error"]
    assert error.startswith(
        f"dataset {DATASET}: {split_dir / 'valid.csv.gz'} is not a list of node ids: "
    ), error


def test_ogbs_cache_and_npz_files_are_never_unpickled(dgl: Dgl, tmp_path: Path) -> None:
    """The other files ogb's loader reads from the dataset's folder: its processed cache
    (dgl.load_graphs: DGL's own binary format, read by its C++ reader) and the npz layout's
    data.npz (numpy.load, which refuses pickled data). A pickle payload planted at either is
    refused with an error naming the file, and never runs; unpickled, it would."""
    marker = tmp_path / "ran"
    d = _tiny(dgl, tmp_path / "csv")
    cache = d / "processed" / "dgl_data_processed"
    _plant(dgl, tmp_path, "pickle", cache, marker)
    assert _load(dgl, tmp_path / "csv") == {
        "error": f"dataset {DATASET}: ogb's loader cannot read {cache} (ogb's cache: delete it "
        "to rebuild it from raw/): Invalid DGL files"
    }
    assert not marker.exists(), "the payload ran"

    b = _tiny(dgl, tmp_path / "npz", "--binary")
    _plant(dgl, tmp_path, "pickle", b / "raw" / "data.npz", marker)
    assert _load(dgl, tmp_path / "npz") == {
        "error": f"dataset {DATASET}: ogb's loader cannot read {b / 'raw'}: Cannot load file "
        "containing pickled data when allow_pickle=False"
    }
    assert not marker.exists(), "the payload ran"

    unpickle = "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))"
    dgl.run(["-c", unpickle, cache], check=False)
    assert marker.exists(), "the planted payload should run when unpickled"


# -- partitioning ---------------------------------------------------------------------------


def test_partition_into_two_parts_matches_the_source(
    dgl: Dgl, dataset_root: Path, two_parts: Path
) -> None:
    config = two_parts / f"{GRAPH}.json"
    for rel in (config.name, "part0", "part1", "orig_nids.pt"):
        assert (two_parts / rel).exists(), rel
    meta = json.loads(config.read_text())
    assert meta["num_parts"] == 2
    assert meta["part_method"] == "metis"
    info = dgl.check(
        "partitions",
        "--config",
        str(config),
        "--root",
        str(dataset_root),
        "--name",
        DATASET,
    )
    assert info["orig_nids_is_permutation"]
    assert info["covered_nodes"] == NUM_NODES
    assert all(p["contiguous_ids"] for p in info["parts"])
    assert all(p["inner_nodes"] > NUM_NODES // 4 for p in info["parts"])
    assert all(p["own_edges"] > 0 and p["inner_nodes_first"] for p in info["parts"])
    # the checker's halo rule (in- and out-edges of a part's own nodes) is DGL's own
    assert info["mismatches"] == {
        "feat": 0,
        "label": 0,
        "train_mask": 0,
        "val_mask": 0,
        "test_mask": 0,
        "edges": 0,
        "halo": 0,
        "local_edges": 0,
        "part_id": 0,
    }
    train = [p["train_nodes"] for p in info["parts"]]  # --balance_train
    assert sum(train) == SPLITS[0]
    assert max(train) - min(train) < 0.1 * SPLITS[0]


def test_partition_reports_a_missing_dataset_without_traceback(dgl: Dgl, tmp_path: Path) -> None:
    script = EXAMPLE / "load_and_partition_graph.py"
    base: list[Arg] = ["--graph_name", GRAPH, "--workspace", tmp_path / "ws", "--num_parts", "2"]
    missing_root = dgl.run(
        [script, *base, "--dataset_url", "https://example.invalid/g.zip"], check=False
    )
    assert missing_root.returncode == 2
    assert "--dataset_url https://example.invalid/g.zip is not supported" in missing_root.stdout
    assert f"{tmp_path / 'ws' / 'raw_data'} does not exist" in missing_root.stderr
    assert "Traceback" not in missing_root.stderr

    (tmp_path / "empty").mkdir()
    missing_dataset = dgl.run(
        [script, *base, "--dataset_root", tmp_path / "empty", "--dataset", "ogbn-nope"],
        check=False,
    )
    assert missing_dataset.returncode == 2
    assert f"{tmp_path / 'empty' / 'ogbn_nope'} does not exist" in missing_dataset.stderr
    assert "make_dataset.py" in missing_dataset.stderr
    assert "Traceback" not in missing_dataset.stderr


# -- training -------------------------------------------------------------------------------


@pytest.mark.slow
def test_graphsage_beats_a_features_only_mlp(
    dgl: Dgl, dataset_root: Path, single_sage: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "mlp.json"
    dgl.run(
        [
            EXAMPLE / "train_single.py",
            "--model",
            "mlp",
            "--dataset",
            DATASET,
            "--dataset_root",
            dataset_root,
            "--num_epochs",
            20,  # give the MLP every chance: its ceiling is the features' information
            "--batch_size",
            BATCH,
            "--eval_every",
            0,
            "--out",
            out,
        ]
    )
    mlp = json.loads(out.read_text())["test_accuracy"]
    sage = single_sage["test_accuracy"]
    assert single_sage["epochs"] == EPOCHS
    assert sage >= 0.85, single_sage
    assert mlp < 0.6
    assert sage - mlp >= 0.2, (sage, mlp)


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no output)"


@pytest.mark.slow
def test_distributed_one_machine_matches_single_process(
    dgl: Dgl, dataset_root: Path, single_sage: dict[str, Any], tmp_path: Path
) -> None:
    """1 DGL server + 1 trainer on 127.0.0.1, started with the environment dglrun gives them
    (launcher/workers/dgl_env.py), trains to within 2 points of the single-process baseline."""
    partition(dgl, dataset_root, tmp_path, 1)
    workload = tmp_path
    ip_config = workload / "ip_config.txt"
    ip_config.write_text(f"127.0.0.1 {free_port()}\n")
    part_config = workload / "dataset" / f"{GRAPH}.json"
    out_dir = workload / "output"
    argv = [
        dgl.python,
        str(EXAMPLE / "train_dist.py"),
        "--graph_name",
        GRAPH,
        "--ip_config",
        str(ip_config),
        "--part_config",
        str(part_config),
        "--num_epochs",
        str(EPOCHS),
        "--batch_size",
        str(BATCH),
        "--seed",
        str(SEED),
    ]
    common = {
        "DGL_NUM_SERVER": "1",
        "DGL_NUM_SAMPLER": "0",
        "DGL_NUM_CLIENT": "1",
        "DGL_IP_CONFIG": str(ip_config),
        "DGL_CONF_PATH": str(part_config),
        "DGL_GRAPH_FORMAT": "csc",
        "OMP_NUM_THREADS": "1",
    }
    server_env = clean_env(**common, DGL_ROLE="server", DGL_SERVER_ID="0")
    trainer_env = clean_env(
        **common,
        DGL_ROLE="client",
        DGL_DIST_MODE="distributed",
        DGL_GROUP_ID="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        RANK="0",
        WORLD_SIZE="1",
        LOCAL_RANK="0",
        DGLRUN_OUTPUT_DIR=str(out_dir),
    )
    logs = {name: workload / f"{name}.log" for name in ("server", "trainer")}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    started = time.monotonic()
    try:
        for name, env in (("server", server_env), ("trainer", trainer_env)):
            with logs[name].open("wb") as log:
                procs[name] = subprocess.Popen(
                    argv,
                    cwd=workload,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        codes = {
            "trainer": procs["trainer"].wait(timeout=150),
            "server": procs["server"].wait(timeout=60),  # the trainer's exit stops it
        }
    except subprocess.TimeoutExpired:
        pytest.fail(
            "the distributed run hung\n"
            + "\n".join(f"--- {n} ---\n{_tail(p)}" for n, p in logs.items())
        )
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    took = time.monotonic() - started
    assert codes == {"trainer": 0, "server": 0}, "\n".join(
        f"--- {n} ---\n{_tail(p)}" for n, p in logs.items()
    )
    assert "[rank 0] epoch 1 loss" in logs["trainer"].read_text()

    metrics = json.loads((out_dir / "metrics.json").read_text())
    for key in ("test_accuracy", "val_accuracy", "epochs", "train_seconds", "world_size"):
        assert key in metrics, key
    assert metrics["epochs"] == EPOCHS
    assert metrics["world_size"] == 1
    assert metrics["num_parts"] == 1
    assert metrics["train_seconds"] > 0
    assert (metrics["val_nodes"], metrics["test_nodes"]) == (SPLITS[1], SPLITS[2])
    single = single_sage["test_accuracy"]
    assert abs(metrics["test_accuracy"] - single) <= 0.02, (metrics, single)
    assert took < 120

    model = dgl.check("model", "--path", str(out_dir / "model.pt"))
    assert model == {
        "in_feats": FEAT_DIM,
        "num_hidden": 64,
        "num_classes": NUM_CLASSES,
        "num_layers": 2,
        "tensors": 6,
        "weights": 4,
    }


def test_the_npz_layout_loads_as_the_same_graph(
    dgl: Dgl, dataset_root: Path, tmp_path: Path
) -> None:
    """make_dataset.py --binary (ogb's npz layout, for big graphs): same graph, edge ids
    included, through ogb's own npz reader."""
    args: list[Arg] = ["--root", tmp_path, "--name", DATASET, "--num-nodes", NUM_NODES,
            "--avg-degree", 10, "--num-classes", NUM_CLASSES, "--feat-dim", FEAT_DIM,
            "--seed", SEED]  # fmt: skip
    args.append("--binary")
    dgl.run([EXAMPLE / "make_dataset.py", *args])
    d = tmp_path / DATASET_DIR
    assert (d / "raw" / "data.npz").is_file() and not (d / "raw" / "edge.csv.gz").exists()
    script = (
        "import sys, json, torch; sys.path.insert(0, sys.argv[1]); import common\n"
        "a, _ = common.load_ogb_graph(sys.argv[2], sys.argv[3])\n"
        "b, _ = common.load_ogb_graph(sys.argv[2], sys.argv[4])\n"
        "same = lambda k: bool(torch.equal(a.ndata[k], b.ndata[k]))\n"
        "print(json.dumps({'edges': all(torch.equal(x, y) for x, y in zip(a.edges(), b.edges())),"
        " 'n': a.num_nodes() == b.num_nodes(),"
        " 'feat': bool(torch.allclose(a.ndata['feat'], b.ndata['feat'], atol=1e-6)),"
        " **{k: same(k) for k in ('label', 'train_mask', 'val_mask', 'test_mask')}}))\n"
    )
    out = dgl.run(["-c", script, EXAMPLE, DATASET, dataset_root, tmp_path]).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"edges": True, "n": True, "feat": True, "label": True, "train_mask": True,
                      "val_mask": True, "test_mask": True}  # fmt: skip
