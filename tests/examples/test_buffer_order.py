"""Buffer order on DGL 2.1 (issue 59, part 3). The mechanism: for each state of an epoch
planned by ``outofcore.order``, an edge mask in the DistGraph (a DistTensor, rewritten at each
state) keeps ``sample_neighbors`` to the edges whose source is resident, and every trained node
is a seed once: in one process, and across two machines' servers and trainers run by dglrun;
the twins sample the same states without the mask and reach outside the buffer. Then the
product's training loader (``outofcore.buffer``) in one process, with its twin; dglrun
training in buffer order is in test_pipeline.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.examples.helpers import Dgl, clean_env, dglrun
from tests.support.paths import REPO
from tests.support.prerequisites import require

PROBE = Path(__file__).with_name("buffer_probe.py")
DIST_PROBE = Path(__file__).with_name("buffer_dist_probe.py")
LOADER_PROBE = Path(__file__).with_name("buffer_loader_probe.py")
NODES = 400  # (buffer_probe.NODES)


def states(dgl: Dgl, work: Path, *extra: str) -> list[dict[str, int]]:
    work.mkdir()
    proc = dgl.run([PROBE, work, 8, 2, 2, *extra], env=clean_env(PYTHONPATH=str(REPO)))
    seen: list[dict[str, int]] = json.loads(proc.stdout.strip().splitlines()[-1])["states"]
    return seen


def test_sampling_stays_in_each_states_buffer(dgl: Dgl, tmp_path: Path) -> None:
    masked = states(dgl, tmp_path / "masked")
    assert len(masked) == 3  # 4 physical partitions, a buffer of 2: 3 states
    assert sum(s["seeds"] for s in masked) == NODES, masked  # each node a seed once
    assert all(s["sampled"] > 0 and s["outside"] == 0 for s in masked), masked
    unmasked = states(dgl, tmp_path / "unmasked", "--no-mask")
    assert [s["seeds"] for s in unmasked] == [s["seeds"] for s in masked]
    assert all(s["outside"] > 0 for s in unmasked), unmasked


def test_sampling_stays_in_every_machines_buffer(
    dgl: Dgl, dataset_root: Path, tmp_path: Path
) -> None:
    """2 machines (dglrun's local transport): each trainer writes its part's edge mask, and
    a node's neighbours on the other machine are sampled only where that machine's buffer
    holds them."""
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")
    proc = dglrun(dgl, tmp_path, dataset_root, "--train-entry-point", str(DIST_PROBE))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if "buffer-probe: " in ln]
    seen = json.loads(line.split("buffer-probe: ", 1)[1])
    rows = seen["states"]
    print(f"buffer sampling on 2 machines, {seen['nodes']} nodes, state by state: {rows}")
    assert len(rows) == 3 and sum(r["seeds"] for r in rows) == seen["nodes"], seen
    assert all(r["sampled"] > 0 and r["outside"] == 0 for r in rows), rows
    assert all(r["outside_free"] > 0 for r in rows), rows  # (the twin: no mask)


def loader_epoch(dgl: Dgl, work: Path, *extra: str) -> dict[str, Any]:
    work.mkdir()
    proc = dgl.run([LOADER_PROBE, work, *extra], env=clean_env(PYTHONPATH=str(REPO)))
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    seen: dict[str, Any] = json.loads(line)
    assert f"{seen['stats']['outside_rows']:.0f} of " in proc.stdout  # (its exit line)
    return seen


def test_the_training_loader_walks_the_buffer_and_counts_what_escapes_it(
    dgl: Dgl, tmp_path: Path
) -> None:
    """The product's loader (outofcore.buffer through the patch): one epoch of a shuffled
    DistNodeDataLoader in buffer order is 3 states, every node a seed once, no input row
    outside the buffer, and the sampler given back as it was; an unshuffled loader keeps
    DGL's order; a sampler with its own prob is refused in one line. The twin breaks the
    mask after the loader wrote it: the loader's count sees the rows outside."""
    seen = loader_epoch(dgl, tmp_path / "buffer")
    stats = seen["stats"]
    assert (stats["epochs"], stats["states"], stats["extra_minibatches"]) == (1, 3, 0), seen
    assert seen["seeds"] == seen["distinct_seeds"] == NODES, seen
    assert stats["input_rows"] > NODES and stats["outside_rows"] == 0, seen
    assert seen["prob_after"] is None, seen
    assert seen["epochs_after_unshuffled"] == 1 and seen["unshuffled_minibatches"] == 8, seen
    assert seen["refusals"] == [
        "out-of-core Buffer order samples with its own edge mask; this loader's sampler "
        "already samples with prob='w': use Exact order"
    ]
    broken = loader_epoch(dgl, tmp_path / "broken", "--broken-mask")
    assert broken["stats"]["outside_rows"] > 0, broken
