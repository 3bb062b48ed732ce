"""podprogram.argtypes: the number flags' argparse types of the operator and dglrun."""

from __future__ import annotations

import argparse

import pytest

from podprogram.argtypes import non_negative_int, number_type, positive_int, seconds


def test_values_at_or_above_the_minimum_pass() -> None:
    assert positive_int("1") == 1 and non_negative_int("0") == 0
    assert seconds("0") == 0.0 and seconds("2.5") == 2.5
    assert number_type(float, "a number of MB/s", 0.0)("12.5") == 12.5


@pytest.mark.parametrize(
    ("parse", "value", "error"),
    [
        (positive_int, "x", "'x' is not an integer"),
        (positive_int, "1.5", "'1.5' is not an integer"),
        (positive_int, "0", "must be at least 1, got 0"),
        (non_negative_int, "-1", "must not be negative, got -1"),
        (seconds, "soon", "'soon' is not a number of seconds"),
        (seconds, "-1", "must not be negative, got -1.0"),
        (number_type(int, "a port", 1024), "80", "must be at least 1024, got 80"),
    ],
)
def test_errors_say_why(parse: object, value: str, error: str) -> None:
    assert callable(parse)
    with pytest.raises(argparse.ArgumentTypeError) as e:
        parse(value)
    assert str(e.value) == error
