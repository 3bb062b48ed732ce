"""A script of the repository outside the installed packages (bench/, examples/), imported as
a module for its tests."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.support.paths import REPO


def load(path: Path) -> ModuleType:
    """``path`` imported for its tests, as it imports itself when it runs. A module of a package
    (bench/demo_large.py) under its dotted name (bench.demo_large), its imports of the package's
    other modules resolved from the checkout; a script of a folder that is no package
    (examples/graphsage/make_chunked.py) under its file name (registered in ``sys.modules``: its
    dataclasses look their module up), its folder put on ``sys.path`` for its own imports."""
    if (path.parent / "__init__.py").is_file():
        parts = path.relative_to(REPO).with_suffix("").parts
        return importlib.import_module(".".join(parts[:-1] if path.stem == "__init__" else parts))
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod
