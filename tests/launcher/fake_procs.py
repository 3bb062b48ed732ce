"""DGL processes that exit when a test says, for launcher.training.train._supervise's tests."""

from __future__ import annotations

import time

from launcher.training.train import _Running
from launcher.workers.hostfile import Host


class FakeProc:
    """A DGL process that exits with ``code`` and ``last`` as its last line ``after`` seconds
    from its creation (never, when ``after`` is None), and is stopped by ``stop``."""

    def __init__(self, label: str, after: float | None, code: int = 1, last: str = "") -> None:
        self.label = label
        self._exit_at = None if after is None else time.monotonic() + after
        self._code = code
        self._last = last
        self.stopped = False

    def poll(self) -> int | None:
        if self.stopped:
            return -15
        if self._exit_at is not None and time.monotonic() >= self._exit_at:
            return self._code
        return None

    def wait(self, timeout: float | None = None) -> int:
        code = self.poll()
        assert code is not None, f"{self.label} waited on while running"
        return code

    def stop(self) -> None:
        self.stopped = True

    def last_line(self) -> str:
        return self._last if self.poll() == self._code else ""

    def last_error_line(self) -> str:
        line = self.last_line()
        return line if ": error: " in line else ""


def job(*trainers: FakeProc) -> list[_Running]:
    """One server (runs until stopped) and one trainer per worker, in dglrun's order."""
    hosts = [Host(f"10.0.0.{i}", 30050, f"worker-{i}") for i in range(len(trainers))]
    running = [_Running(h, "server", 0, FakeProc(f"{h.name}/server-0", None)) for h in hosts]
    return running + [_Running(h, "trainer", 0, p) for h, p in zip(hosts, trainers, strict=True)]
