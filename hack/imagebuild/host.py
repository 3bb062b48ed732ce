"""The build host: running commands, finding tools, messages, removing work trees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


class BuildError(Exception):
    """A build step failed; the message says which and why."""


def log(message: str) -> None:
    print(f"build_images: {message}", file=sys.stderr, flush=True)


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def run(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    log_file: Path | None = None,
    cwd: Path | None = None,
) -> str:
    """Run ``cmd``; its output goes to ``log_file`` (or is returned). Raises BuildError."""
    if log_file is not None:
        with log_file.open("wb") as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        if proc.returncode != 0:
            tail = log_file.read_text(errors="replace").splitlines()[-25:]
            raise BuildError(
                f"{cmd[0]} failed with exit code {proc.returncode} (log: {log_file}):\n  "
                + "\n  ".join(tail)
            )
        return ""
    proc2 = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc2.returncode != 0:
        raise BuildError(
            f"{' '.join(cmd[:3])} ... failed with exit code {proc2.returncode}:\n"
            f"{proc2.stdout[-3000:]}{proc2.stderr[-3000:]}"
        )
    return proc2.stdout


def find_tool(name: str) -> str:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError(f"{name} not found (hack/tools.sh {name} installs it)")


def safe_rmtree(path: Path) -> None:
    """rmtree that first unmounts whatever is still mounted below ``path`` (a debootstrap that
    failed half-way can leave the target's /proc mounted)."""
    if not path.exists():
        return
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        mounted = [line.split()[1] for line in f]
    inside = [m for m in mounted if m == real or m.startswith(real + "/")]
    for mount in sorted(inside, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    shutil.rmtree(path)
