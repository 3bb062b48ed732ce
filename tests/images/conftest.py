"""Fixtures for the image tests: one build per session (hack/build_images.py, cached across
sessions), the tarballs opened for reading, and a private containerd that imports and runs them.

Needs root, debootstrap, containerd, ctr, runc and gcc. In CI (CI=true) hack/tools.sh installs
the missing ones and anything still missing fails the tests; elsewhere they are skipped with
the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from localcluster.cluster import CACHE
from tests.images.ocitar import LayerScan, OciTarball, scan_layer

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "hack" / "build_images.py"
TOOLS = ("debootstrap", "containerd", "ctr", "runc")
NAMESPACE = "test"
SMALL_IMAGES = ("operator", "watcher-loop", "kubectl-download", "pause")
ALL_IMAGES = (*SMALL_IMAGES, "graphsage")
BUILD_TIMEOUT = 3600.0
_report: list[str] = []


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    """Fail in CI, skip elsewhere."""
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def which(name: str) -> str | None:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def report(line: str) -> None:
    _report.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _report:
        terminalreporter.section("container images")
        for line in _report:
            terminalreporter.write_line(line)


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


@pytest.fixture(scope="session")
def layer_scans() -> LayerScans:
    return LayerScans()


# -- containerd ---------------------------------------------------------------------------------


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str


class Containerd:
    """A private containerd (own root, state and socket; CRI disabled) driven with ctr."""

    def __init__(self, base: Path, tools: dict[str, str]) -> None:
        self.base = base
        self.tools = tools
        self.socket = base / "containerd.sock"
        self.log = base / "containerd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.base / "config.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{self.base / "root"}"\n'
            f'state = "{self.base / "state"}"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            "[grpc]\n"
            f'  address = "{self.socket}"\n'
            "[ttrpc]\n"
            f'  address = "{self.socket}.ttrpc"\n'
            '[plugins."io.containerd.internal.v1.opt"]\n'
            f'  path = "{self.base / "opt"}"\n'
        )
        env = dict(os.environ)
        # the shim finds runc on PATH
        env["PATH"] = os.pathsep.join(
            [str(Path(self.tools["runc"]).parent), env.get("PATH", "/usr/bin:/bin")]
        )
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [self.tools["containerd"], "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self.ctr("version", check=False, timeout=10).returncode == 0:
                return
            time.sleep(0.3)
        tail = self.log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"containerd did not start:\n{tail}")

    def ctr(self, *args: str, check: bool = True, timeout: float = 120.0) -> RunResult:
        proc = subprocess.run(
            [self.tools["ctr"], "--address", str(self.socket), "-n", NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        result = RunResult(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"ctr {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return result

    def import_image(self, tarball: str, reference: str) -> None:
        self.ctr("images", "import", tarball, timeout=1800)
        listed = self.ctr("images", "ls", "-q").stdout.split()
        assert reference in listed, f"{reference} not among the imported images {listed}"

    def run(
        self,
        reference: str,
        *command: str,
        env: dict[str, str] | None = None,
        mounts: Sequence[str] = (),
        timeout: float = 180.0,
    ) -> RunResult:
        """``ctr run --rm`` (no network: a new network namespace with only loopback)."""
        args = ["run", "--rm"]
        for key, value in (env or {}).items():
            args += ["--env", f"{key}={value}"]
        for mount in mounts:
            args += ["--mount", mount]
        return self.ctr(*args, reference, new_id(), *command, check=False, timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            tasks = self.ctr("tasks", "ls", "-q", check=False, timeout=30).stdout.split()
            for task in tasks:
                self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False, timeout=30)
                self.ctr("tasks", "delete", "-f", task, check=False, timeout=30)
            containers = self.ctr("containers", "ls", "-q", check=False, timeout=30).stdout
            for container in containers.split():
                self.ctr("containers", "delete", container, check=False, timeout=30)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        real = os.path.realpath(self.base)
        with open("/proc/self/mounts") as f:
            mounts = [line.split()[1] for line in f]
        for mount in sorted((m for m in mounts if m.startswith(real + "/")), reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def new_id() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


PREFIX = "dglop-containerd-"


def sweep_stale(tmp: Path) -> list[Path]:
    """Remove the private containerd directories of sessions that were killed before their
    teardown (the graphsage image unpacks to ~11 GiB): those whose socket no daemon answers
    and that hold no mount."""
    with open("/proc/self/mounts") as f:
        mounted = [line.split()[1] for line in f]
    removed = []
    for base in sorted(tmp.glob(f"{PREFIX}*")):
        sock = base / "containerd.sock"
        real = os.path.realpath(base)
        if any(m == real or m.startswith(real + "/") for m in mounted):
            continue
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(sock))
            continue  # a live daemon: another session's
        except OSError:
            pass
        finally:
            probe.close()
        shutil.rmtree(base, ignore_errors=True)
        removed.append(base)
    return removed


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
