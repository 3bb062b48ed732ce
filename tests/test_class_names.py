"""No class name is defined twice in the product packages (those setup.cfg installs, the
PRODUCT of tests/test_layering.py): a reader, or a tool following a value, never has to ask
which ``DGLJob`` or ``Storage`` is meant. A name may be re-exported (``from dgljob.model
import DGLJob``): that is no second definition.
"""

from __future__ import annotations

import ast
import configparser
from collections import defaultdict

from tests.support.paths import REPO


def product() -> list[str]:
    """The top-level packages setup.cfg installs."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    include = cfg["options.packages.find"]["include"].split()
    return sorted({name for name in include if "." not in name})


# Homonyms that remain in parts of the product other work is reshaping; each row names every
# definition, so the list can only shrink: a row whose name is no longer defined twice fails
# until it is deleted, and a new homonym is not allowed.
KNOWN: dict[str, set[str]] = {
    "Config": {"watcher_loop/config.py", "kubectl_download/config.py"},
    "Log": {"podprogram/log.py", "watcher_loop/loop.py", "kubectl_download/install.py"},
    "Settings": {"podprogram/options.py", "controller/main.py"},
}


def class_definitions() -> dict[str, set[str]]:
    """Each class name of the product, and the files that define a class of that name."""
    found: dict[str, set[str]] = defaultdict(set)
    for package in product():
        for f in sorted((REPO / package).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.ClassDef):
                    found[node.name].add(f.relative_to(REPO).as_posix())
    return found


def test_no_product_class_name_is_defined_twice() -> None:
    assert len(product()) >= 15 and "dgljob" in product()
    twice = {name: files for name, files in class_definitions().items() if len(files) > 1}
    assert twice == KNOWN, (
        f"new homonyms: { {n: f for n, f in twice.items() if KNOWN.get(n) != f} }; "
        f"resolved (delete their row): {sorted(set(KNOWN) - set(twice))}"
    )


def test_the_spec_is_defined_once() -> None:
    """The DGLJob's model lives in dgljob only: the controller and the client import it."""
    found = class_definitions()
    for name in ("DGLJob", "JobSpec", "RunPolicy", "StorageSpec", "ElasticPolicy", "SpecError"):
        assert found[name] == {f"dgljob/{'parse' if name == 'SpecError' else 'model'}.py"}, name
