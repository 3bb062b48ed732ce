"""Fixtures for the image tests: one build per session (hack/build_images.py, cached across
sessions), the tarballs opened for reading, and a private containerd that imports and runs them.

Needs root, debootstrap, containerd, ctr, runc and gcc. In CI (CI=true) hack/tools.sh installs
the missing ones and anything still missing fails the tests; elsewhere they are skipped with
the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.ports import free_port
from tests.images.containerd import PREFIX, Containerd, sweep_stale
from tests.images.helpers import (
    REGISTRY_TOOLS,
    SMALL_IMAGES,
    TOOLS,
    LayerScans,
    report,
    reported,
    run_build,
    which,
)
from tests.images.ocitar import OciTarball
from tests.support.paths import REPO
from tests.support.prerequisites import in_ci, unavailable
from tests.support.waiting import wait_for


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if reported:
        terminalreporter.section("container images")
        for line in reported:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def image_tools() -> dict[str, str]:
    if sys.platform != "linux":
        unavailable("container images need Linux")
    if os.geteuid() != 0:
        unavailable("the image tests need root (debootstrap chroots; containerd runs containers)")
    if in_ci():
        proc = subprocess.run(
            [str(REPO / "hack" / "tools.sh"), *TOOLS], capture_output=True, text=True
        )
        if proc.returncode != 0:
            unavailable(f"hack/tools.sh {' '.join(TOOLS)} failed:\n{proc.stderr[-3000:]}")
    found = {name: which(name) for name in (*TOOLS, "gcc")}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        unavailable(
            f"missing {', '.join(missing)} (hack/tools.sh {' '.join(TOOLS)} installs the Debian "
            "packages; gcc builds the pause image)"
        )
    return {name: path for name, path in found.items() if path is not None}


@pytest.fixture(scope="session")
def built(image_tools: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every image, built (or reused from the cache) once per session."""
    start = time.monotonic()
    summary, stderr = run_build([])
    seconds = time.monotonic() - start
    report(f"hack/build_images.py: {seconds:.1f}s")
    report_lines = [ln for ln in stderr.splitlines() if ln.startswith("build_images: image ")]
    for line in report_lines:
        report("  " + line.removeprefix("build_images: "))
    return {item["image"]: item for item in summary}


@pytest.fixture(scope="session")
def tarballs(built: dict[str, dict[str, Any]]) -> Iterator[dict[str, OciTarball]]:
    opened = {name: OciTarball(Path(item["tarball"])) for name, item in built.items()}
    yield opened
    for t in opened.values():
        t.close()


@pytest.fixture(scope="session")
def layer_scans() -> LayerScans:
    return LayerScans()


@pytest.fixture(scope="session")
def containerd(image_tools: dict[str, str]) -> Iterator[Containerd]:
    for stale in sweep_stale(Path(tempfile.gettempdir())):
        report(f"removed {stale} (left by a session killed before its teardown)")
    base = Path(tempfile.mkdtemp(prefix=PREFIX))
    daemon = Containerd(base, image_tools)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def imported(containerd: Containerd, built: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The small images imported into the private containerd: image -> reference."""
    refs = {}
    start = time.monotonic()
    for name in SMALL_IMAGES:
        containerd.import_image(built[name]["tarball"], built[name]["reference"])
        refs[name] = built[name]["reference"]
    report(f"ctr images import ({', '.join(SMALL_IMAGES)}): {time.monotonic() - start:.1f}s")
    return refs


@pytest.fixture(scope="session")
def graphsage_ref(containerd: Containerd, built: dict[str, dict[str, Any]]) -> str:
    start = time.monotonic()
    item = built["graphsage"]
    containerd.import_image(item["tarball"], item["reference"])
    report(f"ctr images import graphsage: {time.monotonic() - start:.1f}s")
    return str(item["reference"])


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry (Debian's docker-registry: distribution 2.8) on a free loopback port, its
    storage in a temporary folder: its host:port."""
    tools = {name: which(name) for name in REGISTRY_TOOLS}
    if in_ci():
        subprocess.run([str(REPO / "hack" / "tools.sh"), *REGISTRY_TOOLS], capture_output=True)
        tools = {name: which(name) for name in REGISTRY_TOOLS}
    missing = sorted(name for name, path in tools.items() if path is None)
    if missing:
        unavailable(f"missing {', '.join(missing)} (hack/tools.sh {' '.join(REGISTRY_TOOLS)})")
    folder = tmp_path_factory.mktemp("registry")
    address = f"127.0.0.1:{free_port()}"
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {folder / 'data'}}}}}\n"
        f"http: {{addr: {address}}}\n"
    )
    with (folder / "registry.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(tools["docker-registry"]), "serve", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: proc.poll() is not None or _answers(f"http://{address}/v2/"),
            what=f"the registry at {address}",
            timeout=30,
        )
        assert proc.poll() is None, (folder / "registry.log").read_text()[-3000:]
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
