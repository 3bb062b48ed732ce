"""Flags that override environment variables, and the errors that name the one given."""

from __future__ import annotations

import pytest

from podprogram.options import ConfigError, OptionParser


def parser() -> OptionParser:
    p = OptionParser("prog", "Does things.")
    p.option("--poll-interval", "POLL", "seconds between looks")
    p.option("--name", "NAME", "what to look at")
    return p


def test_a_flag_overrides_its_variable_and_is_the_one_blamed() -> None:
    settings = parser().read({"NAME": " env ", "POLL": "1"}, ["--name", " flag "])
    assert settings.get("--name") == ("flag", "--name")
    assert settings.get("--poll-interval") == ("1", "POLL")
    assert parser().read({}).get("--name") == ("", "NAME")


def test_seconds() -> None:
    p = parser()
    assert p.read({}).seconds("--poll-interval", 2.5, positive=True) == 2.5
    assert p.read({"POLL": "0"}).seconds("--poll-interval", 1, positive=False) == 0
    with pytest.raises(ConfigError, match=r"^POLL must be a positive number of seconds, got '0'"):
        p.read({"POLL": "0"}).seconds("--poll-interval", 1, positive=True)
    for bad in ("-1", "nan", "inf", "1m"):
        with pytest.raises(ConfigError, match=r"^--poll-interval must be a number of seconds >= 0"):
            p.read({}, ["--poll-interval", bad]).seconds("--poll-interval", 1, positive=False)


def test_bad_command_lines_raise_and_help_names_the_variables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match="unrecognized arguments: --nope"):
        parser().read({}, ["--nope"])
    with pytest.raises(SystemExit) as stopped:
        parser().read({}, ["--help"])
    assert stopped.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Does things. Every flag overrides the environment variable named in its help." in out
    assert "seconds between looks (POLL)" in out and "what to look at (NAME)" in out
