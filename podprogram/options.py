"""A pod program's settings: environment variables (as the operator sets them), each of which a
flag overrides. Errors raise :class:`ConfigError` naming the variable or the flag given.

    parser = OptionParser("watcher-loop", "Wait until ...")
    parser.option("--timeout", "WATCHER_TIMEOUT", "seconds, 0 = none")
    settings = parser.read(os.environ, argv)
    timeout = settings.seconds("--timeout", 0.0, positive=False)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn


class ConfigError(ValueError):
    """A missing or invalid setting; the message names the variable (or flag)."""


class OptionParser(argparse.ArgumentParser):
    """argparse with string flags that each override one environment variable; a bad command
    line raises :class:`ConfigError` (``--help`` still prints and exits 0)."""

    def __init__(self, prog: str, description: str) -> None:
        super().__init__(
            prog=prog,
            description=f"{description} "
            "Every flag overrides the environment variable named in its help.",
        )
        self._variables: dict[str, str] = {}  # flag -> variable
        self._dests: dict[str, str] = {}  # flag -> argparse's attribute

    def option(self, flag: str, variable: str, help: str) -> None:
        """``flag`` (``--some-name``) overrides the environment variable ``variable`` (named at
        the end of its ``help``)."""
        self._dests[flag] = self.add_argument(flag, help=f"{help} ({variable})").dest
        self._variables[flag] = variable

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)

    def read(self, env: Mapping[str, str], argv: Sequence[str] = ()) -> Settings:
        """Parse ``argv``; the result answers for every option, from the flag or ``env``."""
        args = self.parse_args(list(argv))
        flags = {flag: getattr(args, dest) for flag, dest in self._dests.items()}
        return Settings(flags, dict(self._variables), env)


@dataclass(frozen=True)
class Settings:
    """The flags given (None when absent), which variable each overrides, and the environment."""

    flags: Mapping[str, str | None]
    variables: Mapping[str, str]
    env: Mapping[str, str]

    def get(self, flag: str) -> tuple[str, str]:
        """``(value, name to blame)``: the flag if given, else its variable ('' when unset);
        stripped of surrounding whitespace."""
        value = self.flags[flag]
        if value is not None:
            return value.strip(), flag
        variable = self.variables[flag]
        return self.env.get(variable, "").strip(), variable

    def seconds(self, flag: str, default: float, *, positive: bool) -> float:
        """A finite number of seconds (``> 0`` when ``positive``, else ``>= 0``); ``default``
        when neither the flag nor the variable is set."""
        value, name = self.get(flag)
        if not value:
            return default
        try:
            out = float(value)
        except ValueError:
            out = math.nan
        if not math.isfinite(out) or out < 0 or (positive and out == 0):
            kind = "a positive number of seconds" if positive else "a number of seconds >= 0"
            raise ConfigError(f"{name} must be {kind}, got {value!r}")
        return out
