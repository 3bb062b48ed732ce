"""``make bench``: every benchmark, one after the other, to the end, then one summary.

    python -m bench.run [--only NAME[,NAME...]] [--large] [--out bench-results]

Each benchmark (:data:`BENCHES`) runs as its own process, its output streamed as it comes. One
that fails does not stop the others: its exit is in the summary, and ``make bench`` exits 1 at
the end. The benchmarks that need a cluster bring up the one they need and take it down when
they found none (bench/support/cluster.py); several need a cluster of their own shape (three
nodes, Kueue), so the run starts only when no cluster runs, and a cluster a benchmark left
running after all is taken down (and said) before the next one starts.

At the end: the summary table (figure, value, baseline, ratio; bench/support/figures.py),
printed, and written as ``summary.json`` and ``summary.html`` (with a plot of each benchmark's
ratios) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.support import figures
from bench.support.console import sayer
from localcluster.node import DEFAULT_DIR, running
from localcluster.node import main as node_main

say = sayer("bench")

# name -> the module's arguments; in this order (the single-node ones first, then the ones
# that bring up clusters of their own shape)
BENCHES: dict[str, tuple[str, ...]] = {
    "workqueue_bench": (),
    "pipeline_bench": (),
    "controller_bench": (),
    "partition_bench": (),
    "eta_bench": (),
    "large_graph_bench": (),
    "large_graph_bench --proof-at-limit": (
        "--proof-at-limit", "--nodes", "500000", "--feat-dim", "64",
    ),
    "distpart_bench": (),
    "elastic_partition_bench": (),
    "out_of_core_bench": (),
    "restart_bench": (),
    "nodes_bench": (),
    "elastic_bench": (),
    "kueue_bench": (),
}  # fmt: skip
LARGE = "demo_large"


def module_of(name: str) -> str:
    return f"bench.{name.split()[0]}"


def run_one(name: str, args: tuple[str, ...], env: dict[str, str]) -> tuple[int, float]:
    """The benchmark's exit code and seconds; its output goes to ours as it comes."""
    say(f"{name}: started")
    started = time.monotonic()
    code = subprocess.run(
        [sys.executable, "-m", module_of(name), *args], env=env, check=False
    ).returncode
    took = time.monotonic() - started
    say(f"{name}: exit {code} after {took:.0f}s")
    if running(DEFAULT_DIR):
        say(f"{name} left a cluster running: taken down before the next benchmark")
        node_main(["down"])
    return code, took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="comma-separated names of BENCHES to run (default: all)")
    p.add_argument("--large", action="store_true", help="demo_large's too (make bench LARGE=1)")
    p.add_argument("--large-args", default="", help="demo_large's arguments")
    p.add_argument("--out", type=Path, default=Path("bench-results"))
    a = p.parse_args(argv)
    chosen = dict(BENCHES)
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCHES]
        if unknown:
            p.error(f"--only: no benchmark {', '.join(unknown)} (known: {', '.join(BENCHES)})")
        chosen = {n: BENCHES[n] for n in names}
    if a.large:
        chosen[LARGE] = tuple(a.large_args.split())
    if running(DEFAULT_DIR):
        say(
            f"a cluster runs from {DEFAULT_DIR}; some benchmarks bring up clusters of their own "
            "shape: run `make cluster-down` first"
        )
        return 1
    a.out.mkdir(parents=True, exist_ok=True)
    store = a.out / "figures.jsonl"
    store.unlink(missing_ok=True)
    env = {**os.environ, figures.FIGURES_ENV: str(store.resolve())}
    started = time.monotonic()
    runs = [["benchmark", "exit", "seconds"]]
    failed = []
    for name, args in chosen.items():
        code, took = run_one(name, args, env)
        runs.append([name, str(code), f"{took:.0f}"])
        if code != 0:
            failed.append(name)
    total = time.monotonic() - started
    runs.append(["(all)", "1" if failed else "0", f"{total:.0f}"])
    found = figures.read(store)
    rows = figures.summary_rows(found)
    print("\n## make bench: the benchmarks")
    print(figures.markdown(runs))
    print("\n## make bench: the figures")
    print(figures.markdown(rows))
    summary = {
        "seconds": round(total, 1),
        "benchmarks": [dict(zip(runs[0], r, strict=True)) for r in runs[1:-1]],
        "failed": failed,
        "figures": [{**asdict(f), "ratio": f.ratio} for f in found],
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    title = f"make bench: {len(chosen)} benchmarks in {total / 60:.0f} min"
    (a.out / "summary.html").write_text(figures.html(found, runs, title))
    say(f"{total:.0f}s in all; summary in {a.out / 'summary.json'} and {a.out / 'summary.html'}")
    if failed:
        say(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
