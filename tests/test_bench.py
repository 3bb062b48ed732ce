"""bench/ is a package imported as any other: each module loads as ``bench.<name>``, a benchmark
imports the shared helpers (``bench.support``) and no other benchmark, none through
``sys.path``, and every benchmark the Makefile runs starts as it does there (``python -m
bench.<name>``; ``--help`` only: the benchmarks themselves are ``make bench``'s)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import scripts
from tests.support.paths import REPO

BENCH = REPO / "bench"
MAKEFILE = REPO / "Makefile"
MODULES = sorted(f for f in BENCH.rglob("*.py") if "__pycache__" not in f.parts)


def dotted(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def recipes() -> str:
    """The Makefile's ``bench`` and ``demo-large`` recipes."""
    found = re.findall(r"^(?:bench|demo-large):.*\n((?:\t.*\n)+)", MAKEFILE.read_text(), re.M)
    assert len(found) == 2
    return "".join(found)


def benchmarks() -> list[str]:
    """The modules those recipes run: bench.run's table of them, and demo_large."""
    run = scripts.load(BENCH / "run.py")
    found = set(re.findall(r"python -m (bench\.\w+)", recipes()))
    assert "bench.run" in found, "make bench runs bench.run"
    return sorted(found - {"bench.run"} | {run.module_of(n) for n in [*run.BENCHES, run.LARGE]})


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def source(module: str) -> Path:
    return (REPO / Path(*module.split("."))).with_suffix(".py")


@pytest.mark.parametrize("path", MODULES, ids=dotted)
def test_each_module_loads_as_a_module_of_the_package(path: Path) -> None:
    assert scripts.load(path).__name__ == dotted(path)


def test_no_module_reaches_another_through_sys_path() -> None:
    bad = [
        f"{f.relative_to(REPO)}:{node.lineno}"
        for f in MODULES
        for node in ast.walk(ast.parse(f.read_text(), str(f)))
        if isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]
    assert not bad, bad


def test_a_benchmark_imports_the_shared_helpers_and_no_other_benchmark() -> None:
    bad = []
    for f in MODULES:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{'.' * node.level}{node.module or ''}"]
            bad += [
                f"{f.relative_to(REPO)} imports {name}"
                for name in names
                if name.startswith(".")  # (the package's modules by their full names)
                or (name.split(".")[0] == "bench" and not within(name, "bench.support"))
            ]
    assert not bad, bad


def test_the_makefile_runs_each_benchmark_as_a_module() -> None:
    assert "python bench/" not in recipes()
    names = benchmarks()
    assert "bench.demo_large" in names and "bench.partition_bench" in names
    for name in names:
        assert source(name).is_file(), name


@pytest.mark.parametrize("name", [n for n in benchmarks() if "argparse" in source(n).read_text()])
def test_each_benchmark_with_options_starts_as_the_makefile_starts_it(name: str) -> None:
    """From the repository's root, with nothing else on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-m", name, "--help"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: ")


def test_figures_are_recorded_where_the_run_says_and_summarised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = scripts.load(BENCH / "support" / "figures.py")
    store = tmp_path / "figures.jsonl"
    monkeypatch.delenv(figures.FIGURES_ENV, raising=False)
    figures.record("b", "not kept", 1.0)  # (no run: printed only)
    assert not store.exists()
    monkeypatch.setenv(figures.FIGURES_ENV, str(store))
    figures.record("b", "epoch", 3.0, "s", 2.0, "in memory")
    figures.record("b", "rate", 12_345.0, "cycles/s")
    got = figures.read(store)
    assert [(f.name, f.ratio) for f in got] == [("epoch", 1.5), ("rate", None)]
    rows = figures.summary_rows(got)
    assert rows[1] == ["b", "epoch", "3 s", "2 s (in memory)", "1.50x"]
    assert rows[2] == ["b", "rate", "12,345 cycles/s", "-", "-"]
    page = figures.html(got, [["benchmark", "exit", "seconds"], ["b", "0", "9"]], "t")
    assert "<svg" in page and "1.50x" in page and "12,345 cycles/s" in page


# a stand-in benchmark (the benchmarks themselves are make bench's, hours long): it records one
# figure and exits with the code it is given
PROBE = """import sys
from bench.support.figures import record
code = int(sys.argv[1])
record("bench_probe", f"probe {code}", 3.0, "s", 2.0, "its baseline")
sys.exit(code)
"""


def test_make_bench_runs_every_benchmark_to_its_end_and_writes_one_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A benchmark that fails does not stop the next; the summary has both, their figures
    and exits, as a table, JSON and a page; the run's exit says one failed."""
    run = scripts.load(BENCH / "run.py")
    (tmp_path / "probe_bench.py").write_text(PROBE)
    monkeypatch.setattr(run, "BENCHES", {"fails": ("3",), "passes": ("0",)})
    monkeypatch.setattr(run, "module_of", lambda name: "probe_bench")
    monkeypatch.setattr(run, "running", lambda _dir: False)  # (no cluster: none is needed)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{REPO}")
    out = tmp_path / "results"
    assert run.main(["--out", str(out)]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert [(b["benchmark"], b["exit"]) for b in summary["benchmarks"]] == [
        ("fails", "3"),
        ("passes", "0"),
    ]
    assert summary["failed"] == ["fails"]
    assert [(f["name"], f["ratio"]) for f in summary["figures"]] == [
        ("probe 3", 1.5),
        ("probe 0", 1.5),
    ]
    printed = capsys.readouterr().out
    assert "| bench_probe | probe 0 | 3 s | 2 s (its baseline) | 1.50x |" in printed
    assert "probe 3" in (out / "summary.html").read_text()


def test_a_stopped_make_bench_is_taken_up_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resume runs only the benchmarks without an exit 0 kept (a failed one, one never
    reached, one cut off: its partial figures dropped); the summary has every benchmark's last
    outcome and figures, its time the sum of theirs, and the sittings it took."""
    run = scripts.load(BENCH / "run.py")
    (tmp_path / "probe_bench.py").write_text(PROBE)
    monkeypatch.setattr(run, "module_of", lambda name: "probe_bench")
    monkeypatch.setattr(run, "running", lambda _dir: False)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{REPO}")
    out = tmp_path / "results"
    first = {"a": ("0",), "b": ("3",)}
    monkeypatch.setattr(run, "BENCHES", first)
    assert run.main(["--out", str(out), "--only", "a,b"]) == 1  # (c never reached: stopped)
    cut_off = run.figures_of(out, "c --x")
    cut_off.write_text('{"bench": "c", "name": "half", "value": 1.0}\n')  # (and no outcome)
    ran_before = (out / run.RUNS).read_text()
    monkeypatch.setattr(run, "BENCHES", {"a": ("0",), "b": ("0",), "c --x": ("0",)})
    capsys.readouterr()
    assert run.main(["--out", str(out), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "resuming: a ended 0 in an earlier sitting" in printed
    assert "a: started" not in printed and "b: started" in printed and "c --x: started" in printed
    kept = (out / run.RUNS).read_text()
    assert kept.startswith(ran_before)  # (appended: what the first sitting did is kept)
    summary = json.loads((out / "summary.json").read_text())
    assert [(b["benchmark"], b["exit"]) for b in summary["benchmarks"]] == [
        ("a", "0"),
        ("b", "0"),
        ("c --x", "0"),
    ]
    assert summary["failed"] == [] and summary["sittings"] == [1, 2]
    outcomes = run.outcomes(out)
    assert summary["seconds"] == pytest.approx(sum(o["seconds"] for o in outcomes.values()))
    assert [f["name"] for f in summary["figures"]] == ["probe 0"] * 3  # (not "half")
    assert "(2 sittings)" in (out / "summary.html").read_text()
    capsys.readouterr()
    assert run.main(["--out", str(out)]) == 0  # without --resume: a run from the start
    assert "resuming" not in capsys.readouterr().out
    assert {o["sitting"] for o in run.outcomes(out).values()} == {1}


def test_make_bench_starts_only_with_no_cluster_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = scripts.load(BENCH / "run.py")
    monkeypatch.setattr(run, "running", lambda _dir: True)
    assert run.main(["--out", str(tmp_path)]) == 1
    assert "make cluster-down` first" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())  # (nothing ran)


class FakeKube:
    """kubectl for bench.support.cluster's test: the namespaces there are."""

    def __init__(self, namespaces: set[str]) -> None:
        self.namespaces = namespaces
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, kubeconfig: Path) -> FakeKube:
        return self

    def run(self, *args: str, check: bool = True) -> str:
        self.calls.append(args)
        if args[:2] == ("get", "namespace"):
            return f"namespace/{args[2]}\n" if args[2] in self.namespaces else ""
        return ""


@pytest.mark.parametrize("was_running", [False, True])
def test_a_benchmark_leaves_the_cluster_as_it_found_it(
    monkeypatch: pytest.MonkeyPatch, was_running: bool
) -> None:
    """A cluster it brought up is taken down at its exit; in one that ran, the namespace it
    made is deleted, one that was there is left."""
    cluster = scripts.load(BENCH / "support" / "cluster.py")
    at_exit: list[tuple[Any, ...]] = []
    ups: list[list[str]] = []
    monkeypatch.setattr(cluster.atexit, "register", lambda f, *a, **k: at_exit.append((f, a)))
    monkeypatch.setattr(cluster, "running", lambda _dir: was_running)
    monkeypatch.setattr(cluster, "KUBECONFIG", Path(__file__))  # (exists)

    def node_main(argv: list[str]) -> int:
        ups.append(argv)
        return 0

    monkeypatch.setattr(cluster, "node_main", node_main)
    monkeypatch.setattr(cluster, "install", lambda values=None: None)
    kube = FakeKube(set())
    monkeypatch.setattr(cluster, "Kubectl", kube)
    assert cluster.cluster("bench-ns") is kube
    assert ups == ([] if was_running else [["up"]])
    undo = [a for _, a in at_exit]
    assert ("delete", "namespace", "bench-ns", "--wait=false") in undo
    assert ((["down"],) in undo) is not was_running
    at_exit.clear()
    kube.namespaces.add("there")
    monkeypatch.setattr(cluster, "running", lambda _dir: True)
    cluster.cluster("there")
    assert at_exit == []  # (a running cluster, its namespace there before: nothing to undo)


@pytest.mark.parametrize("bench", ["kueue_bench.py", "demo_large.py"])
def test_a_benchmark_s_cluster_queue_covers_what_the_operator_s_pods_request(bench: str) -> None:
    """kueue_bench waited 600 s on a Workload Kueue never admitted ("resource memory
    unavailable in ClusterQueue"): its quota covered CPU only, and the operator's own init
    containers request memory."""
    from controller.builders import OWN_RESOURCES

    quota = scripts.load(BENCH / bench).QUOTA
    assert set(OWN_RESOURCES["requests"]) <= set(quota)


def test_the_out_of_core_bench_keeps_the_storage_of_the_graphs_it_benches_only(
    tmp_path: Path,
) -> None:
    """Each graph's partition cache holds GiBs: a bench of other sizes before this one left
    theirs, and a storage that kept them all filled the disk (a run failed: "No space left on
    device"). The twin: the graph benched keeps its partitions."""
    prune_storage = scripts.load(BENCH / "out_of_core_bench.py").prune_storage
    storage = tmp_path / "storage"
    for name in ("products-n1000", "products-n2000", "partitions"):  # (and the old flat layout)
        (storage / name / "part0").mkdir(parents=True)
    graphs = [tmp_path / "products-n1000" / "chunked"]
    prune_storage(storage, graphs)
    assert sorted(p.name for p in storage.iterdir()) == ["products-n1000"]
    assert (storage / "products-n1000" / "part0").is_dir()
    prune_storage(tmp_path / "none", graphs)  # (no storage yet: nothing to do)


def test_the_ooc_bench_asks_dglrun_for_a_buffer_of_the_size_it_names() -> None:
    """--buffer-capacities C: the page cache fraction dglrun sizes a buffer of C from (its rule,
    launcher.plans.memory.buffer_capacity, is not restated there); a size no fraction gives is
    refused naming the flag."""
    from launcher.plans.memory import buffer_capacity

    page_cache_fraction_for = scripts.load(BENCH / "out_of_core_bench.py").page_cache_fraction_for
    for c in (1, 5, 6, 7):
        assert buffer_capacity(page_cache_fraction_for(c)) == c
    assert page_cache_fraction_for(5) == 0.375
    with pytest.raises(SystemExit, match="--buffer-capacities: no page cache fraction"):
        page_cache_fraction_for(15)
