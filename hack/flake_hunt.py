"""The flaky tests of the layers where races live: run them N times, list every test that failed
at least once, with its failure.

    python hack/flake_hunt.py [--runs 10] [--layer fake-api] [--layer real-api] [--out DIR]
                              [-- pytest args]

Each run is one pytest of the chosen layers (:data:`LAYERS`), written as JUnit XML under
``--out`` (one file per run). The table printed at the end names each test that failed or
errored in some run, how many runs it failed of those that ran it, and the first line of each
distinct failure. Exit 0 when no test failed in any run, 1 otherwise, 2 when a run could not
be read (pytest itself broke: no XML).

``make flake-hunt`` runs it (``N=10`` by default). Run it with no local cluster up (``make
cluster-down``): the real-API-server layer starts Kueue's manager, whose ports are the host's,
and refuses to start beside a cluster's (localcluster/kueue.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The layers a race hides in: the fake API server's (the controller, informers, client and
# watcher-loop against tests/fakekube) and the real API server's (tests/apiserver).
LAYERS: dict[str, tuple[str, ...]] = {
    "fake-api": (
        "tests/controller",
        "tests/informers",
        "tests/kubeclient",
        "tests/watcher_loop",
        "tests/workqueue",
        "tests/test_fakekube.py",
    ),
    "real-api": ("tests/apiserver",),
}


@dataclass(frozen=True)
class Outcome:
    """One test case of one run: its id, and its failure's text (None: passed or skipped)."""

    test: str
    failure: str | None


@dataclass
class Tally:
    """One test across the runs."""

    runs: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # first line -> runs it failed so


def read_junit(text: str) -> list[Outcome]:
    """The test cases of a pytest JUnit XML report."""
    root = ET.fromstring(text)
    out = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        test = f"{classname}::{name}" if classname else name  # (module.Class::test[param])
        bad = next((c for c in case if c.tag in ("failure", "error")), None)
        if bad is None:
            out.append(Outcome(test, None))
            continue
        message = (bad.get("message") or bad.text or bad.tag).strip()
        out.append(Outcome(test, f"{bad.tag}: {message}"))
    return out


def tally(runs: Iterable[list[Outcome]]) -> dict[str, Tally]:
    """Each test that ran, with the runs it ran in and failed in, and its distinct failures."""
    seen: dict[str, Tally] = {}
    for outcomes in runs:
        for o in outcomes:
            t = seen.setdefault(o.test, Tally())
            t.runs += 1
            if o.failure is not None:
                t.failed += 1
                first = o.failure.splitlines()[0][:300]
                t.failures[first] = t.failures.get(first, 0) + 1
    return seen


def table(tallies: dict[str, Tally], runs: int) -> list[str]:
    """The report: every test that failed in some run, most failures first."""
    flaky = sorted(
        ((name, t) for name, t in tallies.items() if t.failed), key=lambda x: (-x[1].failed, x[0])
    )
    lines = [
        f"flake-hunt: {runs} run(s), {len(tallies)} test(s), {len(flaky)} failed at least once"
    ]
    for name, t in flaky:
        lines.append(f"  {t.failed}/{t.runs}  {name}")
        for first, count in t.failures.items():
            lines.append(f"        {count}x {first}")
    return lines


def run_once(index: int, paths: Sequence[str], extra: Sequence[str], out: Path) -> Path:
    """One pytest of ``paths``; its JUnit XML report."""
    report = out / f"run-{index:02d}.xml"
    argv = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
        "junit_family=xunit1", f"--junitxml={report}", *paths, *extra,
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    tail = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(
        f"flake-hunt: run {index}: exit {proc.returncode} in {time.monotonic() - started:.0f}s: "
        f"{tail}",
        flush=True,
    )
    if not report.is_file():
        raise SystemExit(f"flake-hunt: run {index} wrote no report:\n{proc.stdout[-3000:]}")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, extra = args[:at], args[at + 1 :]
    p = argparse.ArgumentParser(prog="flake-hunt", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=int(os.environ.get("N") or 10))
    p.add_argument("--layer", action="append", choices=sorted(LAYERS), help="default: every layer")
    p.add_argument("--out", type=Path, help="where the runs' reports go (default: a temp dir)")
    a = p.parse_args(args)
    if a.runs < 1:
        p.error("--runs must be at least 1")
    paths = [path for layer in a.layer or sorted(LAYERS) for path in LAYERS[layer]]
    out = a.out or Path(tempfile.mkdtemp(prefix="flake-hunt-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"flake-hunt: {a.runs} run(s) of {' '.join(paths)}; reports in {out}", flush=True)
    reports = [run_once(i, paths, extra, out) for i in range(1, a.runs + 1)]
    try:
        tallies = tally(read_junit(r.read_text()) for r in reports)
    except ET.ParseError as e:
        print(f"flake-hunt: a report could not be read: {e}", file=sys.stderr)
        return 2
    print("\n".join(table(tallies, a.runs)), flush=True)
    return 1 if any(t.failed for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
