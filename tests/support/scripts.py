"""A script of the repository that is not in a package (bench/, examples/), imported as a
module for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load(path: Path) -> ModuleType:
    """``path`` imported under its file name (registered in ``sys.modules``: its dataclasses
    look their module up); its folder goes on ``sys.path`` for its own imports."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod
