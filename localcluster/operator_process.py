"""``dgl-operator`` (``python -m controller.main``) as a process of its own, watched from the
outside: health and metrics servers on free loopback ports, output appended to a log file.

Shared by the API-server tests (kill -9, least privilege), the Prometheus tests and
bench/controller_bench.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from localcluster.ports import free_port

REPO = Path(__file__).resolve().parents[1]


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def http_get(port: int, path: str, timeout: float = 5) -> str | None:
    """The body of ``http://127.0.0.1:<port><path>`` when it answers 200, else None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return str(r.read().decode()) if r.status == 200 else None
    except OSError:
        return None


class OperatorProcess:
    """One ``dgl-operator``; ``start`` may be called again after ``kill`` (same ports, same log)."""

    def __init__(
        self,
        kubeconfig: str | Path,
        log: Path,
        *extra: str,
        workers: int = 4,
        resync_period: float = 30,
        metrics: bool = False,
    ) -> None:
        self.log = log
        self.health_port = free_port()
        self.metrics_port = free_port() if metrics else 0
        metrics_addr = f"127.0.0.1:{self.metrics_port}" if metrics else "0"
        self.argv = [
            sys.executable, "-m", "controller.main",
            "--kubeconfig", str(kubeconfig),
            "--metrics-addr", metrics_addr,
            "--health-addr", f"127.0.0.1:{self.health_port}",
            "--workers", str(workers),
            "--resync-period", f"{resync_period:g}",
            *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        with self.log.open("ab") as f:
            self.proc = subprocess.Popen(
                self.argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            )  # fmt: skip
        return self

    def ready(self) -> bool:
        return http_get(self.health_port, "/readyz", timeout=1) is not None

    def wait_ready(self, timeout: float = 60) -> float:
        """Seconds until /readyz answers; an error with the log's tail if it exits or times out."""
        assert self.proc is not None, "start() first"
        started = time.monotonic()
        while not self.ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the operator exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(
                    f"the operator was not ready after {timeout:.0f}s:\n{self.tail()}"
                )
            time.sleep(0.1)
        return time.monotonic() - started

    def metrics(self) -> str:
        """The Prometheus exposition (the process must have been made with ``metrics=True``)."""
        assert self.metrics_port, "made without metrics=True"
        text = http_get(self.metrics_port, "/metrics")
        if text is None:
            raise RuntimeError(f"cannot scrape the operator's /metrics:\n{self.tail()}")
        return text

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM once it serves (before its handler is installed, SIGTERM simply kills)."""
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + timeout
        while not self.ready() and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.1)
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)  # the operator prints every thread's stack
            time.sleep(1)
            raise RuntimeError(
                f"the operator did not exit {timeout:.0f}s after SIGTERM; its log and stacks:\n"
                + self.tail(120)
            ) from None

    def stop(self) -> None:
        stop_process(self.proc)

    def tail(self, n: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        return ""
