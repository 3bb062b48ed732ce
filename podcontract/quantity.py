"""Kubernetes resource quantities ("512Mi", "2G", "1.5Gi", "100m", "6k") to numbers and back.

The one parser of the project: the operator reads the containers' memory limits with it (and
passes the workers' on to dglrun as ``DGL_OPERATOR_WORKER_MEMORY_LIMIT``), the local cluster
reads its ``--node-memory`` and ``--node-cpu``. It follows apimachinery's ``resource.Quantity``:
decimal suffixes ``n u m k M G T P E`` (``k`` is 1000, lowercase), binary ones
``Ki Mi Gi Ti Pi Ei`` (``Ki`` is 1024), or a decimal exponent (``1e3``). ``K`` is no suffix
(Kubernetes refuses ``6K``), and so is any other spelling.

Standard library only.
"""

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
_HINT = (
    "k, M, G, T, P, E for powers of 1000, Ki, Mi, Gi, Ti, Pi, Ei for powers of 1024, m for 1/1000"
)


def _invalid(value: object, text: str) -> ValueError:
    if re.fullmatch(r"[+-]?[0-9.]+K", text):
        why = "K is not a suffix: k is 1000, Ki is 1024"
    else:
        why = f"a number with one of the suffixes {_HINT}"
    return ValueError(f"invalid quantity {value!r} ({why})")


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's value in base units; raises ValueError with the offending text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(str(value))
    text = str(value).strip()
    m = _RE.match(text)
    if not m:
        raise _invalid(value, text)
    number, suffix = m.group(1), m.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as e:
        raise _invalid(value, text) from e
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
