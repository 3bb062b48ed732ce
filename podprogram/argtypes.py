"""argparse ``type`` functions for the number flags of the programs that have flags of their own
(the operator, dglrun): the value converted, at least a minimum, and an error saying why not
("'x' is not an integer", "must be at least 1, got 0", "must not be negative, got -1.0"), which
argparse prints after the flag's name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def number_type(convert: Callable[[str], N], noun: str, minimum: N) -> Callable[[str], N]:
    """An argparse ``type``: ``convert(value)`` (``noun`` in the error), at least ``minimum``."""

    def parse(value: str) -> N:
        try:
            n = convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not {noun}") from None
        if n < minimum:
            limit = f"be at least {minimum}" if minimum else "not be negative"
            raise argparse.ArgumentTypeError(f"must {limit}, got {n}")
        return n

    return parse


positive_int = number_type(int, "an integer", 1)
non_negative_int = number_type(int, "an integer", 0)
seconds = number_type(float, "a number of seconds", 0.0)  # not negative
