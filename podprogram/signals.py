"""SIGTERM and SIGINT (the kubelet stopping the pod, or Ctrl-C) handled by a pod program."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def on_stop_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """``handler(signum)`` runs on SIGTERM/SIGINT while the context lasts; the previous handlers
    are back afterwards. Outside the main thread (where Python cannot set handlers) nothing is
    installed."""

    def handle(signum: int, _frame: FrameType | None) -> None:
        handler(signum)

    previous: dict[int, Callable[..., Any] | int | None] = {}
    try:
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError):  # not the main thread
                previous[sig] = signal.signal(sig, handle)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
