"""The repository's top-level packages are listed once (hack/packages.py reads the lists): the
product's in setup.cfg's [options.packages.find] include, the development code's in
hack/packages.py's DEVELOPMENT. Each tool takes them from there: packaging (setup.cfg itself),
the image builder (hack/imagebuild), make lint and make typecheck (the Makefile's PKGS and
DEV_PKGS), mypy's strictness (global: no list to keep), the layering (tests/test_layering.py).
A new top-level package on neither list fails here; so does images/Dockerfile, the one copy
(docker cannot read setup.cfg), when it does not copy exactly the product packages.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.scripts import load

packages = load(REPO / "hack" / "packages.py")
PRODUCT: tuple[str, ...] = packages.product()
DEVELOPMENT: tuple[str, ...] = packages.DEVELOPMENT


def test_every_top_level_package_is_on_one_list() -> None:
    assert packages.problems() == []
    assert {"controller", "launcher", "dgljob", "dgl_operator", "chunkedgraph"} <= set(PRODUCT)
    assert {"tests", "e2e", "bench", "soak", "localcluster"} == set(DEVELOPMENT)


def _tree(root: Path, include: str, folders: list[str]) -> Path:
    """A repository in miniature: setup.cfg with ``include`` and a package per folder."""
    (root / "setup.cfg").write_text(f"[options.packages.find]\ninclude =\n{include}\n")
    for folder in folders:
        (root / folder).mkdir()
        (root / folder / "__init__.py").write_text("")
    return root


def test_a_package_on_no_list_fails_the_check(tmp_path: Path) -> None:
    """The check the test above runs, over a tree with one package too many, one missing and
    one listed twice: each is a line saying what to do."""
    repo = _tree(
        tmp_path,
        "    core\n    core.*\n    gone\n    gone.*\n    tests\n    tests.*",
        ["core", "tests", "bench", "newpkg"],
    )
    (repo / "scripts").mkdir()  # a folder of scripts (no __init__.py) is no package
    (repo / "scripts" / "tool.py").write_text("")
    assert packages.problems(repo, ("tests", "bench")) == [
        "newpkg/ is a top-level package on no list: add it to setup.cfg's "
        "[options.packages.find] include (newpkg and newpkg.*) if it is part of the product, "
        "or to hack/packages.py's DEVELOPMENT if it is development code",
        "gone is listed (setup.cfg's [options.packages.find] include) but gone/__init__.py does "
        "not exist",
        "tests is both a product and a development package",
    ]
    # each put right: the check passes
    (repo / "gone").mkdir()
    (repo / "gone" / "__init__.py").write_text("")
    assert packages.problems(repo, ("bench", "newpkg")) == []
    # and a development package that is no longer listed fails it again
    assert packages.problems(repo, ("newpkg",)) == [
        "bench/ is a top-level package on no list: add it to setup.cfg's "
        "[options.packages.find] include (bench and bench.*) if it is part of the product, "
        "or to hack/packages.py's DEVELOPMENT if it is development code",
    ]


@pytest.mark.parametrize(
    ("include", "error"),
    [
        ("    core", "'core' is listed without 'core.*'"),
        ("    core\n    core.*\n    extra.*", "'extra.*' is listed without 'extra'"),
        ("    core\n    core.*\n    core", "'core' is listed twice"),
        ("    core\n    core.*\n    core.sub", "'core.sub' is not a top-level package name"),
        ("    core*\n    core", "'core*' is not a top-level package name"),
        ("", "lists no package"),
    ],
)
def test_a_malformed_product_list_is_refused_naming_the_entry(
    tmp_path: Path, include: str, error: str
) -> None:
    _tree(tmp_path, include, [])
    with pytest.raises(packages.PackageListError) as e:
        packages.product(tmp_path)
    assert str(e.value).startswith("setup.cfg [options.packages.find] include: ")
    assert error in str(e.value)


def test_a_missing_product_list_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(packages.PackageListError, match=r"setup\.cfg: no such file"):
        packages.product(tmp_path)
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = x\n")
    with pytest.raises(packages.PackageListError, match=r"include: missing"):
        packages.product(tmp_path)


def test_the_command_line_prints_each_list() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        script = str(REPO / "hack" / "packages.py")
        return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)

    assert run("product").stdout.split() == list(PRODUCT)
    assert run("development").stdout.split() == list(DEVELOPMENT)
    assert (run("check").returncode, run("check").stderr) == (0, "")
    bad = run("products")
    assert bad.returncode == 2 and bad.stderr.startswith("usage: hack/packages.py")


def _make_commands(*targets: str) -> list[list[str]]:
    """The commands ``make -n`` prints for ``targets`` (nothing is run), as argument lists."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run(
        ["make", "-n", "-s", "--no-print-directory", *targets],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [shlex.split(line) for line in out.splitlines() if line.strip()]


def _arguments(commands: list[list[str]], *tool: str) -> list[str]:
    """The arguments of the one command that starts with ``tool`` (its program by file name)."""
    found = [
        c[len(tool) :]
        for c in commands
        if Path(c[0]).name == tool[0] and tuple(c[1 : len(tool)]) == tool[1:]
    ]
    assert len(found) == 1, f"{' '.join(tool)}: {len(found)} commands"
    return found[0]


def test_make_lints_and_type_checks_every_package() -> None:
    """make lint and make typecheck take setup.cfg's packages and the development ones (the
    Makefile's PKGS and DEV_PKGS), and the folders of scripts; examples/ is not type-checked
    (its scripts run with the DGL venv's interpreter)."""
    commands = _make_commands("lint", "typecheck")
    everything = [*PRODUCT, *DEVELOPMENT, "examples", "hack"]
    assert _arguments(commands, "ruff", "check") == everything
    assert _arguments(commands, "ruff", "format", "--check") == everything
    assert _arguments(commands, "mypy") == [*PRODUCT, *DEVELOPMENT, "hack"]


def test_mypy_is_strict_on_every_module() -> None:
    """strict is mypy's global setting; no override names a package of ours (one that set
    `strict` would set it for every module anyway, python/mypy#11401, and one that relaxed a
    flag would make a package less strict than the rest)."""
    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    ours = {*PRODUCT, *DEVELOPMENT, *packages.top_level_packages(REPO / "hack")}
    ours |= {p.stem for p in (REPO / "hack").glob("*.py")}
    for override in mypy.get("overrides", []):
        assert "strict" not in override, override["module"]
        modules = override["module"]
        heads = {m.split(".")[0] for m in ([modules] if isinstance(modules, str) else modules)}
        assert not heads & ours, f"a mypy override for {sorted(heads & ours)}"
        assert set(override) <= {"module", "ignore_missing_imports"}, override


def test_the_dockerfile_copies_every_product_package() -> None:
    """images/Dockerfile is the docker-build twin of hack/build_images.py: it must copy every
    package setup.cfg installs, or its images fail at import time, and nothing else."""
    dockerfile = (REPO / "images" / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (\w+)/ ", dockerfile, re.M)
    missing = set(PRODUCT) - set(copied)
    assert not missing, f"images/Dockerfile does not COPY {sorted(missing)}"
    assert sorted(copied) == sorted(PRODUCT), "images/Dockerfile copies another folder"
