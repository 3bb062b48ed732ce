"""Workers reached through the operator's ``kubexec.sh`` and ``kubectl cp`` (inside a cluster).

Remote processes run under ``python -P -m launcher.workers.remote run`` (:mod:`launcher.programs`)
so they can be stopped by session (killing a local ``kubectl exec`` leaves the remote process
running).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from launcher import programs
from launcher.workers.hostfile import Host
from launcher.workers.transport import (
    LineSink,
    PopenProc,
    Proc,
    WorkerTransportError,
    default_sink,
    stop_all,
    time_limit,
)

PIDFILE_DIR = "/tmp/dglrun"


class KubectlTransport:
    def __init__(
        self,
        hosts: list[Host],
        *,
        kubexec: str,
        kubectl: str,
        workspace: str,
        python: str = "python3",
        sink: LineSink = default_sink,
        timeout: float = 600.0,
    ) -> None:
        self._hosts = hosts
        self.kubexec = kubexec
        self.kubectl = kubectl
        self._workspace = workspace
        self.python = python
        self.sink = sink
        self.timeout = timeout
        self._procs: list[tuple[Host, PopenProc, str]] = []
        self._coordinators: list[Proc] = []
        self._seq = 0
        # pidfiles of this run only: a restarted launcher never reads a previous run's
        self._run_id = secrets.token_hex(4)
        self._deadline: float | None = None

    # -- plumbing -------------------------------------------------------------------------

    def until(self, deadline: float | None) -> None:
        self._deadline = deadline

    def _call(
        self, argv: list[str], what: str, timeout: float | None, *, bounded: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``bounded``: the phase's deadline applies (stopping processes is never cut short)."""
        timeout = timeout or self.timeout
        if bounded and self._deadline is not None:
            timeout = min(timeout, self._deadline - time.monotonic())
            if timeout <= 0:
                raise WorkerTransportError(f"{what}: no time left in the phase")
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise WorkerTransportError(f"{what} timed out after {e.timeout:.0f}s") from e
        except OSError as e:
            raise WorkerTransportError(f"cannot run {argv[0]}: {e.strerror}") from e

    def _run(
        self, argv: list[str], what: str, timeout: float | None, *, bounded: bool = True
    ) -> str:
        out = self._call(argv, what, timeout, bounded=bounded)
        if out.returncode != 0:
            raise WorkerTransportError(
                f"{what} exited with code {out.returncode}: {out.stderr.strip()[-500:]}"
            )
        return out.stdout

    def _exec(
        self, target: str, command: str, *, timeout: float | None = None, bounded: bool = True
    ) -> str:
        """Run a shell command in a pod (``target`` may be '<pod> -c <container>')."""
        argv = [self.kubexec, target, command]
        return self._run(argv, f"{target}: `{command}`", timeout, bounded=bounded)

    def _kubectl(self, *args: str, timeout: float | None = None) -> str:
        return self._run([self.kubectl, *args], f"kubectl {' '.join(args)}", timeout)

    def _remote_manifest(self, target: str, remote_dir: str) -> dict[str, tuple[int, str]]:
        raw = self._exec(
            target, programs.command_line(self.python, programs.REMOTE, "manifest", remote_dir)
        )
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise WorkerTransportError(
                f"{target}: unreadable manifest of {remote_dir}: {raw[:200]}"
            ) from e
        return {k: (int(v[0]), str(v[1])) for k, v in data.items()}

    def _cp(self, local: Path, pod: str, remote: str, container: str | None = None) -> None:
        args = ["cp", str(local), f"{pod}:{remote}"]
        if container:
            args += ["-c", container]
        self._kubectl(*args)

    # -- Transport ------------------------------------------------------------------------

    def workers(self) -> list[Host]:
        return list(self._hosts)

    def workspace(self, worker: Host) -> str:
        return self._workspace

    def copy_to(self, worker: Host, local: Path, remote: str) -> None:
        parent = str(Path(remote).parent)
        self._exec(worker.name, f"mkdir -p {shlex.quote(parent)}")
        self._cp(local, worker.name, remote)

    def write_file(self, worker: Host, remote: str, content: str) -> None:
        parent = shlex.quote(str(Path(remote).parent))
        self._exec(
            worker.name,
            f"mkdir -p {parent} && printf %s {shlex.quote(content)} > {shlex.quote(remote)}",
        )

    def manifest(self, worker: Host, remote_dir: str) -> dict[str, tuple[int, str]]:
        return self._remote_manifest(worker.name, remote_dir)

    def fetch(self, worker: Host, remote: str, local: Path) -> bool:
        try:
            self._exec(worker.name, f"test -e {shlex.quote(remote)}")
        except WorkerTransportError:
            return False
        local.parent.mkdir(parents=True, exist_ok=True)
        self._kubectl("cp", f"{worker.name}:{remote}", str(local))
        return True

    def exists(self, worker: Host, path: str) -> bool:
        try:
            self._exec(worker.name, f"test -f {shlex.quote(path)}", timeout=60)
        except WorkerTransportError:
            return False
        return True

    def start(self, worker: Host, argv: list[str], env: dict[str, str], label: str) -> Proc:
        self._seq += 1
        pidfile = f"{PIDFILE_DIR}/{self._run_id}-{self._seq}-{label.replace('/', '-')}.pid"
        inner = [
            *programs.argv(self.python, programs.REMOTE),
            "run",
            "--pidfile",
            pidfile,
            "--",
            "env",
            *[f"{k}={v}" for k, v in sorted(env.items())],
            *argv,
        ]
        command = f"exec {shlex.join(inner)}"
        proc = PopenProc(
            label,
            [self.kubexec, worker.name, command],
            self.sink,
            on_stop=lambda: self._remote_kill(worker, [pidfile]),
        )
        self._procs.append((worker, proc, pidfile))
        return proc

    def run(self, worker: Host, argv: list[str], timeout: float) -> tuple[int, str]:
        command = f"{shlex.join(argv)} 2>&1"
        out = self._call([self.kubexec, worker.name, command], f"{worker.name}: {argv[0]}", timeout)
        if out.returncode != 0 and not out.stdout.strip():
            # kubectl itself failed (no such pod, refused exec): its message is on stderr
            return out.returncode, out.stderr.strip()[-500:]
        return out.returncode, out.stdout

    def kill(self, worker: Host, pidfiles: list[str]) -> None:
        self._remote_kill(worker, pidfiles)

    def rsh_agent(self) -> str:
        return self.kubexec

    def start_coordinator(
        self, argv: list[str], env: dict[str, str], label: str, sink: LineSink
    ) -> Proc:
        proc = PopenProc(label, argv, sink, env={**os.environ, **env})
        self._coordinators.append(proc)
        return proc

    def _remote_kill(self, worker: Host, pidfiles: list[str]) -> None:
        try:
            self._exec(
                worker.name,
                programs.command_line(self.python, programs.REMOTE, "kill", "--pidfile", *pidfiles),
                timeout=30,
                bounded=False,
            )
        except WorkerTransportError as e:
            self.sink("dglrun", f"warning: could not stop processes on {worker.name}: {e}")

    def release(self) -> None:
        """Nothing to leave running: close() stops everything."""

    def close(self) -> None:
        stop_all([*self._coordinators, *(proc for _, proc, _ in self._procs)])
        self._procs, self._coordinators = [], []


def wait_for_container(
    transport: KubectlTransport,
    pod: str,
    container: str,
    *,
    init: bool,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Block until ``container`` of ``pod`` is running (the fix of the original's race #22,
    where the partitioner copied into a launcher init container that had not started)."""
    key = "initContainerStatuses" if init else "containerStatuses"
    deadline = time.monotonic() + timeout
    delay = 0.5
    last = "not found"
    while True:
        try:
            raw = transport._kubectl("get", "pod", pod, "-o", "json", timeout=60)
        except WorkerTransportError as e:
            last = str(e)[-200:]
        else:
            try:
                status = json.loads(raw).get("status") or {}
            except ValueError:
                status = {}
            for cs in status.get(key) or []:
                if cs.get("name") == container:
                    state = cs.get("state") or {}
                    if "running" in state:
                        return
                    last = next(iter(state), "unknown")
        if time.monotonic() + delay > deadline:
            raise WorkerTransportError(
                f"container {container} of pod {pod} is not running after {timeout:.0f}s "
                f"(last state: {last})"
            )
        sleep(delay)
        delay = min(delay * 2, 10.0)


def deliver(
    transport: KubectlTransport,
    local_dir: Path,
    pod: str,
    container: str,
    remote_dir: str,
    expected: dict[str, tuple[int, str]],
    *,
    attempts: int = 5,
    timeout: float = 600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Copy ``local_dir`` into ``pod``/``container`` at ``remote_dir`` and verify every file's
    size and SHA-256 arrived, retrying with backoff; all of it within ``timeout`` seconds
    (0: no limit)."""
    target = f"{pod} -c {container}"
    delay = 1.0
    with time_limit(transport, timeout) as deadline:
        for attempt in range(1, attempts + 1):
            left = deadline - time.monotonic()
            wait_for_container(transport, pod, container, init=True, timeout=left, sleep=sleep)
            try:
                transport._exec(target, f"mkdir -p {shlex.quote(remote_dir)}")
                for entry in sorted(local_dir.iterdir()):
                    transport._cp(entry, pod, f"{remote_dir}/{entry.name}", container)
                got = transport._remote_manifest(target, remote_dir)
                missing = {k: v for k, v in expected.items() if got.get(k) != v}
                if not missing:
                    return
                raise WorkerTransportError(
                    f"{len(missing)} file(s) did not arrive intact in {pod}:{remote_dir}, e.g. "
                    f"{next(iter(missing))}"
                )
            except WorkerTransportError as e:
                if attempt == attempts:
                    raise WorkerTransportError(
                        f"delivery to {pod} failed after {attempts} attempts: {e}"
                    ) from e
                transport.sink("dglrun", f"delivery attempt {attempt} failed ({e}); retrying")
                sleep(delay)
                delay = min(delay * 2, 30.0)
