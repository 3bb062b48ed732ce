"""outofcore with real DGL: the .npy export of a DGL-API partition, the patch of DGL 2.1's
key-value store in one process (tests/examples/out_of_core_probe.py), and the runner's
one-line refusals. dglrun --out-of-core end to end is in test_pipeline.py (DGL-API) and
test_parmetis.py (DistParMETIS)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.examples.helpers import EXAMPLE, GRAPH, Dgl, clean_env
from tests.support.paths import REPO

PROBE = Path(__file__).with_name("out_of_core_probe.py")


def exported(dgl: Dgl, two_parts: Path, tmp_path: Path) -> Path:
    """A copy of the session's 2-part partition with its features exported; its config."""
    shutil.copytree(two_parts, tmp_path / "dataset")
    config = tmp_path / "dataset" / f"{GRAPH}.json"
    proc = dgl.run(["-P", "-m", "outofcore", "export", config], env=clean_env(PYTHONPATH=str(REPO)))
    assert proc.stdout.count(" MiB of node features as .npy in ") == 2, proc.stdout
    return config


def test_the_patch_serves_the_exported_features_memory_mapped(
    dgl: Dgl, two_parts: Path, tmp_path: Path
) -> None:
    config = exported(dgl, two_parts, tmp_path)
    registry = tmp_path / "registry.json"
    proc = dgl.run([PROBE, config, registry], env=clean_env(PYTHONPATH=str(REPO)))
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["keys"] == ["_N/feat", "_N/label", "_N/test_mask", "_N/train_mask", "_N/val_mask"]
    assert seen["files_equal"] and seen["loaded_equal"] and seen["edges_loaded"]
    assert seen["feat_file_mapped"] and seen["one_mapping"] and seen["served_is_mapped"]
    assert seen["registered"] == [f"node~_N~{k[3:]}-kvdata-" for k in seen["keys"]]
    assert seen["unregistered_is_dgl"]
    assert "0.npy: holds (" in seen["mismatch"] and "DGL expects (" in seen["mismatch"]
    assert "DGL 2.2.0" in seen["version"] and "--out-of-core" in seen["version"]
    assert seen["restored"] and seen["aligned"] and seen["pull_equal"]
    # rows of 32 float32 (128 B): rows 3-7 share the first page, row 900 is on page 28
    assert seen["ranges"] == 2
    assert "out-of-core: part 0: 5 node feature(s)" in proc.stdout


def test_a_server_of_a_partition_without_feature_files_fails_in_one_line(
    dgl: Dgl, two_parts: Path, tmp_path: Path
) -> None:
    shutil.copytree(two_parts, tmp_path / "dataset")
    config = tmp_path / "dataset" / f"{GRAPH}.json"
    env = clean_env(
        PYTHONPATH=str(REPO),
        DGL_ROLE="server",
        DGL_CONF_PATH=str(config),
        DGL_SERVER_ID="1",
        DGL_NUM_SERVER="1",
    )
    train = EXAMPLE / "train_dist.py"
    proc = dgl.run(
        ["-P", "-m", "outofcore", "run", train, "--graph_name", GRAPH], env=env, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    index = tmp_path / "dataset" / "part1" / "node_feat_npy" / "index.json"
    assert proc.stderr.strip().splitlines() == [
        f"out-of-core: {index}: not found: this partition was not written for out-of-core "
        "workers (partition again with dglrun --out-of-core, a DGLJob's spec.outOfCore)"
    ]
    missing = dgl.run(
        ["-P", "-m", "outofcore", "run", tmp_path / "nope.py"],
        env=clean_env(PYTHONPATH=str(REPO)),
        check=False,
    )
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        f"out-of-core: {tmp_path / 'nope.py'}: no such training script",
    )
    usage = dgl.run(["-P", "-m", "outofcore"], env=clean_env(PYTHONPATH=str(REPO)), check=False)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: python -m outofcore run")


def test_export_names_a_partition_config_it_cannot_read(dgl: Dgl, tmp_path: Path) -> None:
    bad = tmp_path / "g.json"
    bad.write_text("{not json")
    proc = dgl.run(
        ["-P", "-m", "outofcore", "export", bad], env=clean_env(PYTHONPATH=str(REPO)), check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"out-of-core: {bad}: cannot read the partition config: ")
    assert len(proc.stderr.strip().splitlines()) == 1
