"""JSON text's nesting, measured before it is parsed: ``json.loads`` recurses, and a document
of a few thousand brackets raises RecursionError. What dglrun reads from the claim
(launcher/jsonfile.py) and what the operator reads from a job's report (podcontract/report.py)
is checked with :func:`too_deep` first. Standard library only."""

from __future__ import annotations

import re

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def too_deep(text: str, depth: int) -> bool:
    """Whether ``text`` nests arrays and objects more than ``depth`` levels (brackets inside
    strings not counted), found by counting, not by recursion."""
    level = 0
    for m in _BRACKET.finditer(_STRING.sub('""', text)):
        if m.group() in "[{":
            level += 1
            if level > depth:
                return True
        else:
            level -= 1
    return False
