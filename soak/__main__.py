"""``make soak``: ``python -m soak [--seed N] [--small] [--jobs N] [--faults N] [--minutes M]``.

Brings up the 3-node cluster with the Coscheduling scheduler and Kueue when none runs (and
takes it down at the end; one that runs is used as it is when it has that shape), installs
this tree's operator with :data:`soak.OPERATOR_VALUES`, runs the plan of the seed (printed
first: ``--seed`` replays a run) and prints the report. Exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace

from localcluster import kueue
from localcluster.helm import install_operator
from localcluster.node import COSCHEDULER, DEFAULT_DIR, refresh_images, running, schedulers
from localcluster.node import main as node_main
from soak import OPERATOR_VALUES
from soak.faults import FAULTS
from soak.kinds import KINDS
from soak.plan import DEFAULT, SMALL, make_plan
from soak.run import run
from soak.world import World

NODES = 3


def say(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, help="replay the run of this seed (default: a new one)")
    p.add_argument("--small", action="store_true", help="make test's size (a few minutes)")
    p.add_argument("--jobs", type=int, help="jobs to submit")
    p.add_argument("--faults", type=int, help="faults to inject")
    p.add_argument("--minutes", type=float, help="over how many minutes to submit and strike")
    p.add_argument(
        "--drain-minutes",
        type=float,
        default=20.0,
        help="after the last submission, how long jobs may take to end",
    )
    p.add_argument("--keep-cluster", action="store_true", help="leave a cluster it brought up")
    a = p.parse_args(argv)
    size = SMALL if a.small else DEFAULT
    if a.jobs is not None:
        size = replace(size, jobs=a.jobs)
    if a.faults is not None:
        size = replace(size, faults=a.faults)
    if a.minutes is not None:
        size = replace(size, submit_seconds=a.minutes * 60, fault_seconds=a.minutes * 60)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    say(
        f"soak: seed {seed} (replay: python -m soak --seed {seed}"
        f"{' --small' if a.small else ''}); {size}"
    )
    plan = make_plan(seed, size, sorted(KINDS), sorted(FAULTS))
    brought_up = False
    if running(DEFAULT_DIR):
        if len_nodes() < NODES or COSCHEDULER not in schedulers(DEFAULT_DIR) or not kueue.running():
            say("soak: a cluster of another shape runs: `make cluster-down` first")
            return 1
    else:
        if node_main(["up", "--nodes", str(NODES), "--scheduler-plugins", "--kueue"]) != 0:
            say("soak: the 3-node cluster did not come up")
            return 1
        brought_up = True
    world = World(DEFAULT_DIR / "control-plane" / "admin.kubeconfig", dir=DEFAULT_DIR)
    try:
        install_operator(
            world.kubeconfig, refresh_images().get("dgl-operator", ""), OPERATOR_VALUES
        )
        report = run(world, plan, say, a.drain_minutes * 60)
    finally:
        if brought_up and not a.keep_cluster:
            node_main(["down"])
    for line in report.lines():
        say(line)
    return 1 if report.violations else 0


def len_nodes() -> int:
    from localcluster.node import node_names

    return len(node_names(DEFAULT_DIR))


if __name__ == "__main__":
    sys.exit(main())
