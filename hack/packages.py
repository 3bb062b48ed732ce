"""The repository's top-level packages, each said once: the product's and the development code's.

The product packages are setup.cfg's ``[options.packages.find] include`` (what ``pip install .``
installs and the images copy: setuptools needs them there), each as ``name`` and ``name.*``; the
development code's (tested, linted and type-checked, never installed) is :data:`DEVELOPMENT`.
Every other tool reads them here: the Makefile's lint and type check
(``python3 hack/packages.py product|development`` prints them), the image builder
(``imagebuild/project.py``), tests/test_layering.py (which package may import which) and
tests/test_packages.py, which fails on a top-level package that is on neither list
(:func:`problems`). mypy needs no list: ``strict = true`` is its global setting in
pyproject.toml.

    python3 hack/packages.py product | development | check

Standard library only: make runs it with the machine's Python, before any virtualenv exists.
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTION = "options.packages.find"

# Top-level packages of development code: the local cluster, the tests, the end-to-end tests,
# the benchmarks, the chaos soak. (examples/ and hack/ are folders of scripts, no packages.)
DEVELOPMENT = ("localcluster", "tests", "e2e", "bench", "soak")


class PackageListError(Exception):
    """setup.cfg's list of product packages is missing or malformed (the message says where)."""


def product(repo: Path = REPO) -> tuple[str, ...]:
    """The product's top-level packages, in setup.cfg's order. Each must be listed as ``name``
    and ``name.*`` (without the second, setuptools installs the package without its
    sub-packages); any other entry is an error naming it."""
    setup_cfg = repo / "setup.cfg"
    where = f"{setup_cfg.name} [{SECTION}] include"
    parser = configparser.ConfigParser()
    if not parser.read(setup_cfg):
        raise PackageListError(f"{setup_cfg}: no such file")
    if not parser.has_option(SECTION, "include"):
        raise PackageListError(f"{where}: missing (the product packages are listed there)")
    entries = parser.get(SECTION, "include").split()
    names = [e for e in entries if e.isidentifier()]
    subpackages = {e.removesuffix(".*") for e in entries if e.endswith(".*")}
    errors = [
        f"{e!r} is not a top-level package name or its sub-packages (name.*)"
        for e in entries
        if not e.isidentifier() and not (e.endswith(".*") and e[:-2].isidentifier())
    ]
    errors += [f"{n!r} is listed without {n + '.*'!r}" for n in names if n not in subpackages]
    errors += [f"{s + '.*'!r} is listed without {s!r}" for s in sorted(subpackages - set(names))]
    errors += [f"{n!r} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    if not names and not errors:
        errors.append("lists no package")
    if errors:
        raise PackageListError(f"{where}: " + "; ".join(errors))
    return tuple(names)


def top_level_packages(repo: Path = REPO) -> set[str]:
    """The repository's top-level folders with an ``__init__.py``."""
    return {d.name for d in repo.iterdir() if (d / "__init__.py").is_file()}


def problems(repo: Path = REPO, development: tuple[str, ...] = DEVELOPMENT) -> list[str]:
    """What is wrong with the two lists against ``repo``'s folders, one line each: a top-level
    package on neither list, a listed name that is no top-level package, a name on both."""
    listed = product(repo)
    found = top_level_packages(repo)
    out = [
        f"{name}/ is a top-level package on no list: add it to setup.cfg's [{SECTION}] include "
        f"({name} and {name}.*) if it is part of the product, or to hack/packages.py's "
        "DEVELOPMENT if it is development code"
        for name in sorted(found - set(listed) - set(development))
    ]
    out += [
        f"{name} is listed ({where}) but {name}/__init__.py does not exist"
        for names, where in (
            (listed, f"setup.cfg's [{SECTION}] include"),
            (development, "hack/packages.py's DEVELOPMENT"),
        )
        for name in names
        if name not in found
    ]
    out += [
        f"{name} is both a product and a development package"
        for name in sorted(set(listed) & set(development))
    ]
    return out


def main(argv: list[str]) -> int:
    usage = "usage: hack/packages.py product | development | check"
    if len(argv) != 1 or argv[0] not in ("product", "development", "check"):
        print(usage, file=sys.stderr)
        return 2
    try:
        if argv[0] == "product":
            print(" ".join(product()))
        elif argv[0] == "development":
            print(" ".join(DEVELOPMENT))
        else:
            found = problems()
            for line in found:
                print(line, file=sys.stderr)
            return 1 if found else 0
    except PackageListError as e:
        print(f"hack/packages.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
