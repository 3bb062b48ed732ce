"""The product's docstrings name only what the code has.

A dotted name in a docstring (a module's, a class's or a function's) whose first part is a
product package (setup.cfg's, `Repository.product_packages`), in double backticks, a Sphinx
role or plain text (``launcher.plans.memory``, :func:`controller.lifecycle.steps`), must be a
module of the repository or a name that module defines at its top level: an assignment, a def,
a class, an import (and, after a class without bases, a name its body defines). The names are
resolved by the files' syntax trees (tests/docs/truth.py's `Repository.resolve`, the documents'
own check), nothing is imported. A module moved or a name renamed leaves no docstring pointing
at what is gone. Comments and other strings are not read; a file name (``controller.py``), a
path (``launcher/plans/memory.py``) or an attribute of something else (``self.x``) is no
dotted name of a package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.checks import missing_modules, module_names
from tests.docs.references import Span, docstrings
from tests.docs.truth import Repository

REPO = Path(__file__).resolve().parents[2]


def product_files(root: Path, packages: frozenset[str]) -> list[str]:
    """Every Python file of the product packages, relative to ``root``."""
    return sorted(
        f.relative_to(root).as_posix()
        for package in packages
        for f in (root / package).rglob("*.py")
        if "__pycache__" not in f.parts
    )


def product_spans(repo: Repository) -> list[Span]:
    return [
        span
        for path in product_files(repo.root, repo.product_packages)
        for span in docstrings(repo.root, path)
    ]


def stale_names(repo: Repository) -> list[str]:
    """`path:line: `name`: why` for each dotted name of a product package that a product
    docstring names and the code lacks."""
    return list(missing_modules(product_spans(repo), repo, repo.product_packages))


@pytest.fixture(scope="module")
def repo() -> Repository:
    return Repository(REPO)


def test_the_product_docstrings_name_only_what_the_code_has(repo: Repository) -> None:
    problems = stale_names(repo)
    assert not problems, f"{len(problems)} stale name(s) in docstrings:\n" + "\n".join(problems)


def test_the_check_reads_every_product_package(repo: Repository) -> None:
    """The product's list is setup.cfg's, each package's docstrings are read, and they name
    enough of the product for the check above to mean something."""
    packages = repo.product_packages
    assert {"controller", "launcher", "dgljob", "dgl_operator", "outofcore"} <= packages
    spans = product_spans(repo)
    read = {span.doc.split("/")[0] for span in spans}
    assert read == packages, f"no docstring read in {sorted(packages - read)}"
    named = list(module_names(spans, packages))
    assert len(named) > 100, named
    assert any(name == "controller.lifecycle.steps" for _, name in named)


STALE_TREE = {
    "setup.cfg": "[options.packages.find]\ninclude =\n    pkg\n    pkg.*\n",
    "pkg/__init__.py": '"""The package: ``pkg.mod``, ``pkg.sub``, ``pkg.gone`` (moved)."""\n',
    "pkg/sub/__init__.py": "",
    "pkg/mod.py": '''"""A module: ``pkg.mod.X`` and :data:`pkg.mod.STEPS` (renamed), in
pkg/mod.py beside mod.py, with self.x, other.thing and e.g. nothing else.
"""

import os
from pathlib import Path

X = 1
# pkg.mod.NOT_A_DOCSTRING: comments are not read
TEXT = "pkg.mod.NOR_A_STRING"


class Klass:
    """pkg.mod.Klass.method, and pkg.mod.Klass.nope (no such member)."""

    field: int = 0

    def method(self) -> None:
        """pkg.mod.Klass.field, pkg.mod.os, pkg.mod.Path, then pkg.mod.f and pkg.sub.gone."""


def f() -> None:
    """The stale one, in plain text: pkg.mod.g."""
''',
}


def test_a_stale_docstring_name_is_reported(tmp_path: Path) -> None:
    """The check on a small tree: every stale name in a docstring is reported with its file
    and line; what exists, comments, other strings, paths and other objects' attributes are
    not."""
    for path, text in STALE_TREE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    tree = Repository(tmp_path)
    assert tree.product_packages == {"pkg"}
    assert stale_names(tree) == [
        "pkg/__init__.py:1: `pkg.gone`: pkg (pkg/__init__.py) defines no gone",
        "pkg/mod.py:1: `pkg.mod.STEPS`: pkg.mod (pkg/mod.py) defines no STEPS",
        "pkg/mod.py:14: `pkg.mod.Klass.nope`: pkg.mod.Klass has no nope",
        "pkg/mod.py:19: `pkg.sub.gone`: pkg.sub (pkg/sub/__init__.py) defines no gone",
        "pkg/mod.py:23: `pkg.mod.g`: pkg.mod (pkg/mod.py) defines no g",
    ]
