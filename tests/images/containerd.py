"""A private containerd (own root, state and socket; CRI disabled) driven with ctr, and the
sweep of the ones sessions killed before their teardown left behind."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

NAMESPACE = "test"


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
    teardown (the graphsage image takes ~3 GiB there): those whose socket no daemon answers
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
