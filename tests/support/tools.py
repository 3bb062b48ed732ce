"""Binaries hack/tools.sh installs or finds (promtool, prometheus, helm, ...)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.paths import REPO
from tests.support.prerequisites import unavailable


def tool_paths(*tools: str) -> dict[str, Path]:
    """Paths printed by hack/tools.sh (name=path lines); fails or skips when it cannot."""
    try:
        out = subprocess.run(
            [str(REPO / "hack" / "tools.sh"), *tools],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        unavailable(f"hack/tools.sh {' '.join(tools)} did not run: {e}")
    if out.returncode != 0:
        unavailable(
            f"hack/tools.sh {' '.join(tools)} failed ({out.returncode}): {out.stderr.strip()} "
            f"(as root, `hack/tools.sh {' '.join(tools)}` installs what is missing)"
        )
    paths: dict[str, Path] = {}
    for line in out.stdout.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            paths[name.strip()] = Path(value.strip())
    for tool in tools:
        path = paths.get(tool)
        if path is None or not os.access(path, os.X_OK):
            unavailable(f"{tool} is not available (hack/tools.sh printed {out.stdout!r})")
    return paths
