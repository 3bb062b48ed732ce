"""Small helpers shared by the programs that run in a DGLJob's pods (``dglrun``,
``watcher-loop``, ``kubectl-download``). Standard library only: those images stay light."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import TextIO

# Where Kubernetes reads a container's termination message: the pod's status shows it, and the
# operator quotes it in the job's Failed condition.
TERMINATION_LOG = "/dev/termination-log"


def write_termination_message(message: str, path: str | os.PathLike[str] = TERMINATION_LOG) -> None:
    """Write ``message`` where the kubelet reads it; nothing outside a pod (no such file)."""
    if not os.path.exists(path):
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, message.encode()[:4096])
        finally:
            os.close(fd)


class Log:
    """Short human-readable lines ``<prog>: ...`` on a stream (stderr by default); remembers the
    last error (for the termination message)."""

    def __init__(self, prog: str, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._prog = prog
        self._lock = threading.Lock()
        self.last_error: str | None = None

    def _write(self, line: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        with self._lock:
            stream.write(f"{self._prog}: {line}\n")
            stream.flush()

    def info(self, message: str) -> None:
        self._write(message)

    def error(self, message: str) -> None:
        self.last_error = message
        self._write(f"error: {message}")
