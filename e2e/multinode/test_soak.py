"""The chaos soak, small (``make soak`` runs the default size; this run left ``make test``,
which ignores this file, to keep CI within its time): a few jobs of the
soak's kinds into its two LocalQueues, a few faults at random times, every invariant checked
(soak/invariants.py). Seeded: SOAK_SEED=N replays another plan (the default one is fixed, so
that a failure here is the same run again). Marked: a fault may power a node off (it powers it
on again before the soak ends)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from e2e.helpers import figure
from e2e.multinode.helpers import MultiNode
from soak import OPERATOR_VALUES
from soak.faults import FAULTS
from soak.kinds import KINDS
from soak.plan import SMALL, make_plan
from soak.run import run
from soak.world import World

SEED = 47
DRAIN_SECONDS = 240.0


@pytest.mark.powers_off_a_node
def test_a_small_seeded_soak_breaks_no_invariant(
    multinode: MultiNode, operator: str, install: Any
) -> None:
    seed = int(os.environ.get("SOAK_SEED") or SEED)
    plan = make_plan(seed, SMALL, sorted(KINDS), sorted(FAULTS))
    print(f"soak: seed {seed} (SOAK_SEED={seed} replays it)")
    install(OPERATOR_VALUES)
    try:
        report = run(World(multinode.kubeconfig, dir=multinode.dir), plan, print, DRAIN_SECONDS)
    finally:
        install({"replicas": "1", "gangScheduling": ""})  # (the session's own)
    lines = report.lines()
    print("\n".join(lines))
    figure(f"soak (seed {seed}): {len(report.injected)} faults, {len(report.jobs)} jobs in "
           f"{report.seconds / 60:.1f} min, {len(report.violations)} violations")  # fmt: skip
    assert report.injected, "no fault was injected"
    assert not report.violations, "\n".join(lines)
