"""The DGL interpreter: DGL, torch and ogb live in a virtualenv of their own (the project's
environment does not have them), so tests run DGL code as its subprocesses.

It is ``$DGL_PYTHON``, else the cached DGL virtualenv
(~/.cache/dgl-operator/venv-dgl-<sha256(requirements-dgl.txt)[:12]>).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.support.paths import REPO

DGL_VENV_BASE = Path(os.environ.get("DGL_OPERATOR_CACHE", Path.home() / ".cache" / "dgl-operator"))
KNOWN_DGL_PYTHON = DGL_VENV_BASE / "venv-dgl-8c11b4e92900" / "bin" / "python"


def dgl_python_candidates() -> list[Path]:
    out = []
    if os.environ.get("DGL_PYTHON"):
        out.append(Path(os.environ["DGL_PYTHON"]))
    req = REPO / "requirements-dgl.txt"
    if req.is_file():
        key = hashlib.sha256(req.read_bytes()).hexdigest()[:12]
        out.append(DGL_VENV_BASE / f"venv-dgl-{key}" / "bin" / "python")
    out.append(KNOWN_DGL_PYTHON)
    return list(dict.fromkeys(out))  # without duplicates, in order


def find_dgl_python() -> str | None:
    for cand in dgl_python_candidates():
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None
