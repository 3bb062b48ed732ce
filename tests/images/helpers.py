"""The image tests' build: hack/build_images.py run once per session (cached across
sessions), its layers scanned once per digest (:class:`LayerScans`), and the figures reported
in the test summary (:func:`report`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from localcluster.cluster import CACHE
from tests.images.ocitar import LayerScan, OciTarball, scan_layer
from tests.support.paths import REPO

BUILD = REPO / "hack" / "build_images.py"
TOOLS = ("debootstrap", "containerd", "ctr", "runc")
# the push and pull of docs/operations.md (test_registry.py)
REGISTRY_TOOLS = ("skopeo", "docker-registry")
SMALL_IMAGES = ("operator", "watcher-loop", "kubectl-download", "pause")
ALL_IMAGES = (*SMALL_IMAGES, "graphsage")
BUILD_TIMEOUT = 3600.0
reported: list[str] = []


def which(name: str) -> str | None:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def report(line: str) -> None:
    reported.append(line)


def run_build(args: Sequence[str], *, timeout: float = BUILD_TIMEOUT) -> tuple[list[Any], str]:
    """Run hack/build_images.py; returns (its JSON summary, its stderr)."""
    with tempfile.TemporaryDirectory(prefix="build-images-") as tmp:
        summary = Path(tmp) / "summary.json"
        proc = subprocess.run(
            [sys.executable, str(BUILD), "--json", str(summary), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )
        if proc.returncode != 0:
            pytest.fail(
                f"build_images.py {' '.join(args)} exited {proc.returncode}:\n"
                f"{proc.stderr[-6000:]}",
                pytrace=False,
            )
        return json.loads(summary.read_text()), proc.stderr


class LayerScans:
    """Layer scans by digest: each blob is read once per session whatever image holds it."""

    MARKERS = (
        str(CACHE).encode(),
        b"/images/tmp/",
        b"venv-dgl-",
        str(REPO).encode(),
    )

    def __init__(self) -> None:
        self._scans: dict[str, LayerScan] = {}

    def get(self, tarball: OciTarball, descriptor: dict[str, Any], *, base: bool) -> LayerScan:
        digest = descriptor["digest"]
        if digest not in self._scans:
            with tarball.open_blob(digest) as blob:
                self._scans[digest] = scan_layer(
                    blob, descriptor["mediaType"], markers=() if base else self.MARKERS
                )
        return self._scans[digest]
