"""Kubernetes resource quantities ("512Mi", "2G", "1.5Gi", "100m") to numbers and back."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_RE = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's value in base units; raises ValueError with the offending text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(str(value))
    text = str(value).strip()
    m = _RE.match(text)
    if not m:
        raise ValueError(f"invalid quantity {value!r}")
    number, suffix = m.group(1), m.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as e:
        raise ValueError(f"invalid quantity {value!r}") from e
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix and suffix[0] in "eE":
        return base * (Decimal(10) ** int(suffix[1:]))
    return base * _DECIMAL[suffix]


def format_bytes(n: int) -> str:
    """Shortest exact binary-suffixed form: 536870912 -> '512Mi', 1000 -> '1000'."""
    for suffix, size in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)
