"""bench/ is a package imported as any other: each module loads as ``bench.<name>``, a benchmark
imports the shared helpers (``bench.support``) and no other benchmark, none through
``sys.path``, and every benchmark the Makefile runs starts as it does there (``python -m
bench.<name>``; ``--help`` only: the benchmarks themselves are ``make bench``'s)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

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
    """The modules those recipes run."""
    return sorted(set(re.findall(r"python -m (bench\.\w+)", recipes())))


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
