"""sigs.k8s.io/scheduler-plugins as hack/scheduler-plugins.sh builds it (cached; at once when it
is built already): the Coscheduling scheduler and its PodGroup CRD. A build that fails is a
missing prerequisite (:func:`tests.support.prerequisites.unavailable`)."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from tests.support.paths import REPO
from tests.support.prerequisites import unavailable

SCRIPT = REPO / "hack" / "scheduler-plugins.sh"
PODGROUP_CRD = "scheduling.x-k8s.io_podgroups.yaml"


@cache
def _folder() -> tuple[Path | None, str]:
    try:
        proc = subprocess.run(
            ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=3600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return None, f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"
    return Path(lines[-1]), ""


def scheduler_plugins_folder() -> Path:
    """The folder with ``scheduler`` and the PodGroup CRD (built on first use)."""
    folder, problem = _folder()
    if folder is None or not (folder / PODGROUP_CRD).is_file():
        unavailable(f"scheduler-plugins is not available (hack/scheduler-plugins.sh): {problem}")
    return folder


def podgroup_crd_path() -> Path:
    return scheduler_plugins_folder() / PODGROUP_CRD
