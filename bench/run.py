"""``make bench``: every benchmark, one after the other, to the end, then one summary.

    python -m bench.run [--only NAME[,NAME...]] [--large] [--resume] [--out bench-results]

Each benchmark (:data:`BENCHES`) runs as its own process, its output streamed as it comes. One
that fails does not stop the others: its exit is in the summary, and ``make bench`` exits 1 at
the end. The benchmarks that need a cluster bring up the one they need and take it down when
they found none (bench/support/cluster.py); several need a cluster of their own shape (three
nodes, Kueue), so the run starts only when no cluster runs, and a cluster a benchmark left
running after all is taken down (and said) before the next one starts.

A whole run takes hours, so it can be taken up again where it stopped: each benchmark's outcome
is kept in ``runs.jsonl`` as it ends, and its figures in ``figures/<benchmark>.jsonl``;
``--resume`` (``make bench RESUME=1``) runs only the benchmarks without an exit 0 there (a
benchmark cut off starts again, its partial figures dropped), and the summary counts the
sittings and adds up the benchmarks' own times.

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
RUNS = "runs.jsonl"  # under --out: each benchmark's outcome, appended as it ends


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


def figures_of(out: Path, name: str) -> Path:
    """Where benchmark ``name``'s figures are kept (one file each: a rerun replaces its own)."""
    return out / "figures" / (name.replace(" --", "--").replace(" ", "_") + ".jsonl")


def outcomes(out: Path) -> dict[str, dict[str, Any]]:
    """Each benchmark's last outcome kept in ``runs.jsonl``: exit, seconds, the sitting (1, 2,
    ...: the runs of ``make bench`` it took) and when that sitting started."""
    path = out / RUNS
    if not path.exists():
        return {}
    kept = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["benchmark"]: r for r in kept}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="comma-separated names of BENCHES to run (default: all)")
    p.add_argument("--large", action="store_true", help="demo_large's too (make bench LARGE=1)")
    p.add_argument("--large-args", default="", help="demo_large's arguments")
    p.add_argument("--out", type=Path, default=Path("bench-results"))
    p.add_argument(
        "--resume",
        action="store_true",
        help="run only the benchmarks without an exit 0 kept under --out (make bench RESUME=1)",
    )
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
    if not a.resume:
        (a.out / RUNS).unlink(missing_ok=True)
        for old in (a.out / "figures").glob("*.jsonl"):
            old.unlink()
    before = outcomes(a.out)
    sitting = 1 + max((r["sitting"] for r in before.values()), default=0)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    done = [n for n in chosen if before.get(n, {}).get("exit") == 0]
    if done:
        say(f"resuming: {', '.join(done)} ended 0 in an earlier sitting, not run again")
    (a.out / "figures").mkdir(exist_ok=True)
    started = time.monotonic()
    for name, args in chosen.items():
        if name in done:
            continue
        store = figures_of(a.out, name)
        store.unlink(missing_ok=True)  # (what a run cut off had recorded)
        env = {**os.environ, figures.FIGURES_ENV: str(store.resolve())}
        code, took = run_one(name, args, env)
        with (a.out / RUNS).open("a", encoding="utf-8") as f:
            row = {
                "benchmark": name,
                "exit": code,
                "seconds": round(took, 1),
                "sitting": sitting,
                "started": when,
            }
            f.write(json.dumps(row) + "\n")
    wall = time.monotonic() - started
    kept = outcomes(a.out)
    runs = [["benchmark", "exit", "seconds"]]
    runs += [[n, str(kept[n]["exit"]), f"{kept[n]['seconds']:.0f}"] for n in chosen]
    failed = [n for n in chosen if kept[n]["exit"] != 0]
    total = sum(kept[n]["seconds"] for n in chosen)
    sittings = sorted({kept[n]["sitting"] for n in chosen})
    runs.append(["(all)", "1" if failed else "0", f"{total:.0f}"])
    found = [f for n in chosen for f in figures.read(figures_of(a.out, n))]
    rows = figures.summary_rows(found)
    print("\n## make bench: the benchmarks")
    print(figures.markdown(runs))
    print("\n## make bench: the figures")
    print(figures.markdown(rows))
    summary = {
        "seconds": round(total, 1),
        "sittings": sittings,
        "benchmarks": [dict(zip(runs[0], r, strict=True)) for r in runs[1:-1]],
        "failed": failed,
        "figures": [{**asdict(f), "ratio": f.ratio} for f in found],
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    title = f"make bench: {len(chosen)} benchmarks in {total / 60:.0f} min"
    if len(sittings) > 1:
        title += f" ({len(sittings)} sittings)"
    (a.out / "summary.html").write_text(figures.html(found, runs, title))
    say(
        f"{total:.0f}s in all (the benchmarks' own times; this sitting {wall:.0f}s, "
        f"{len(sittings)} sitting(s)); summary in {a.out / 'summary.json'} and "
        f"{a.out / 'summary.html'}"
    )
    if failed:
        say(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
