"""The ``main()`` of a pod program: load the configuration, run, leave a termination message.

    def main(argv: Sequence[str] | None = None) -> int:
        return run_program(Log("watcher-loop"), argv, load_config, wait, config_exit=2)

* a :class:`~podprogram.options.ConfigError` from ``load(os.environ, argv)``: logged as an
  error, written as the termination message, exit ``config_exit``;
* ``--help``: exit 0 (argparse printed the help);
* otherwise the exit code of ``program(config, log)``; when it is neither 0 nor a signal's
  ``128+N``, the last error the program logged (if any) becomes the termination message.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from podprogram.log import Log
from podprogram.options import ConfigError
from podprogram.termination import TERMINATION_LOG, write_termination_message

C = TypeVar("C")
L = TypeVar("L", bound=Log)
SIGNAL_EXIT_BASE = 128  # a program stopped by signal N exits 128+N


def run_program(
    log: L,
    argv: Sequence[str] | None,
    load: Callable[[Mapping[str, str], Sequence[str]], C],
    program: Callable[[C, L], int],
    *,
    config_exit: int,
    termination_log: str | os.PathLike[str] = TERMINATION_LOG,
) -> int:
    """Run a pod program (``argv`` None: ``sys.argv[1:]``); returns its exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        config = load(os.environ, args)
    except ConfigError as e:
        log.error(str(e))
        write_termination_message(str(e), termination_log)
        return config_exit
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    code = program(config, log)
    if code != 0 and code <= SIGNAL_EXIT_BASE and log.last_error:
        write_termination_message(log.last_error, termination_log)
    return code
