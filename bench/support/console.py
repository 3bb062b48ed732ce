"""A benchmark's progress lines: ``<its name>: <text>``, flushed at once (its output is read
while it runs, often for hours)."""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]


def sayer(program: str) -> Say:
    """``say(text)`` printing ``program: text``; with ``program`` empty, ``text`` alone."""
    prefix = f"{program}: " if program else ""

    def say(text: str) -> None:
        print(f"{prefix}{text}", flush=True)

    return say
