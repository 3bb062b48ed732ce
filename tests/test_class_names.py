"""No class name is defined twice in the product packages (those setup.cfg installs, as
hack/packages.py reads them): a reader, or a tool following a value, never has to ask
which ``DGLJob`` or ``Storage`` is meant. A name may be re-exported (``from dgljob.model
import DGLJob``): that is no second definition.
"""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.support.paths import REPO
from tests.support.scripts import load


def product() -> list[str]:
    """The top-level packages setup.cfg installs."""
    packages: list[str] = sorted(load(REPO / "hack" / "packages.py").product())
    return packages


def class_definitions() -> dict[str, list[str]]:
    """Each class name of the product, and the file of each definition of a class of that name
    (a file twice when it defines the name twice)."""
    found: dict[str, list[str]] = defaultdict(list)
    for package in product():
        for f in sorted((REPO / package).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(f.relative_to(REPO).as_posix())
    return found


def test_no_product_class_name_is_defined_twice() -> None:
    assert len(product()) >= 15 and "dgljob" in product()
    twice = {name: files for name, files in class_definitions().items() if len(files) > 1}
    assert twice == {}, f"homonyms (rename all but one): {twice}"


def test_the_spec_is_defined_once() -> None:
    """The DGLJob's model lives in dgljob only: the controller and the client import it."""
    found = class_definitions()
    for name in ("DGLJob", "JobSpec", "RunPolicy", "StorageSpec", "ElasticPolicy", "SpecError"):
        assert found[name] == [f"dgljob/{'parse' if name == 'SpecError' else 'model'}.py"], name
