"""Buffer mode's sampling mechanism on DGL 2.1 (issue 59, part 3, not yet a mode of the
workers): for each state of an epoch planned by ``outofcore.order``, an edge mask in the
DistGraph (a DistTensor, rewritten at each state) keeps ``sample_neighbors`` to the edges
whose source is resident, and every trained node is a seed once. The twin samples the same
states without the mask and reaches outside the buffer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.examples.helpers import Dgl, clean_env
from tests.support.paths import REPO

PROBE = Path(__file__).with_name("buffer_probe.py")
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
