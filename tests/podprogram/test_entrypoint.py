"""run_program: configuration errors, --help, and which exits leave a termination message."""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from podprogram.entrypoint import run_program
from podprogram.log import Log
from podprogram.options import ConfigError, OptionParser
from podprogram.signals import on_stop_signals


def load(env: Mapping[str, str], argv: Sequence[str]) -> str:
    p = OptionParser("prog", "Test program.")
    p.option("--word", "WORD", "a word")
    word, name = p.read(env, argv).get("--word")
    if not word:
        raise ConfigError(f"{name} is not set")
    return word


@pytest.fixture
def termination_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("WORD", raising=False)
    path = tmp_path / "termination-log"
    path.write_text("")
    return path


def test_a_configuration_error_is_logged_and_left_as_the_message(termination_log: Path) -> None:
    stream = io.StringIO()
    code = run_program(
        Log("prog", stream), [], load, lambda *_: 0, config_exit=7, termination_log=termination_log
    )
    assert code == 7
    assert stream.getvalue() == "prog: error: WORD is not set\n"
    assert termination_log.read_text() == "WORD is not set"


def test_help_exits_0(termination_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Log("prog", io.StringIO())
    assert run_program(log, ["--help"], load, lambda *_: 1, config_exit=2) == 0
    assert "(WORD)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("code", "message"),
    [(0, ""), (1, "it broke"), (2, "it broke"), (128 + signal.SIGTERM, "")],
)
def test_the_last_error_is_the_message_unless_success_or_signal(
    termination_log: Path, code: int, message: str
) -> None:
    log = Log("prog", io.StringIO())

    def program(word: str, got_log: Log) -> int:
        assert (word, got_log) == ("hello", log)
        log.error("it broke")
        return code

    got = run_program(
        log, ["--word", "hello"], load, program, config_exit=2, termination_log=termination_log
    )
    assert got == code
    assert termination_log.read_text() == message


def test_a_failure_without_a_logged_error_leaves_no_message(termination_log: Path) -> None:
    log = Log("prog", io.StringIO())
    run_program(
        log, ["--word", "x"], load, lambda *_: 1, config_exit=2, termination_log=termination_log
    )
    assert termination_log.read_text() == ""


def test_stop_signals_call_the_handler_and_restore_the_previous_ones() -> None:
    before = signal.getsignal(signal.SIGTERM)
    received: list[int] = []
    with on_stop_signals(received.append):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert received == [signal.SIGTERM, signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) is before
