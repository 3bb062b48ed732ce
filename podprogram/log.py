"""A pod program's log: short human-readable lines ``<prog>: ...`` on a stream."""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class Log:
    """Lines ``<prog>: ...`` on ``stream`` (stderr by default, looked up at each write), whole
    lines from any thread; remembers the last error (for the termination message)."""

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
