"""Sizes as dglrun prints them, for what the client and the report show."""

from __future__ import annotations


def size(n: float) -> str:
    """``512 B``, ``14.2 KB``, ``3.4 MB``, ``1.2 GB`` (powers of 1000, as dglrun prints)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
