"""A DGL server's or trainer's script run as ``python SCRIPT ARGS`` would run it, after
:func:`dglprocess.start.prepare` (``python -m dglprocess run`` and ``python -m outofcore run``)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from dglprocess import start


class RunRefused(Exception):
    """A script that cannot be run (the runner says it in one line and exits 2)."""


def run(script: str, args: list[str]) -> None:
    path = Path(script)
    if not path.is_file():
        raise RunRefused(f"{script}: no such training script")
    start.prepare()
    sys.argv = [script, *args]
    sys.path.insert(0, str(path.resolve().parent))  # what `python SCRIPT` puts first
    runpy.run_path(script, run_name="__main__")
