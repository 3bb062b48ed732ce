"""Every program dglrun starts with ``python -m``, named once, and how it is started.

dglrun starts these on its own pod, on the partitioner and, through ``kubectl exec`` (or
``kubexec.sh`` under mpirun), on the workers, whose working directory is the training image's:
the user's folder. ``python -m X`` puts that folder first on ``sys.path``, so a ``launcher.py``
or a ``distpart/`` of the user's would be imported instead of ours. Every command here therefore
runs Python in safe-path mode (``-P``, Python 3.11+, what setup.cfg requires and the images
have): nothing is prepended to ``sys.path``, and the module comes from the installed packages
(``PYTHONPATH`` and site-packages) whatever the working directory holds.
"""

from __future__ import annotations

import os
import shlex
import site
import sysconfig
from collections.abc import Mapping
from pathlib import Path

CLI = "launcher.cli"  # dglrun itself (run again as root of a user namespace: --transport local)
REMOTE = "launcher.workers.remote"  # run / kill / manifest on the far side of kubectl exec
PULL = "launcher.delivery.pull"  # a worker pulls its part from the partition server
SERVE = "launcher.delivery.server"  # the partition server (--transport local's own)
CACHE = "launcher.storage.cache"  # a worker's part copied into / out of the partition cache
CHECK_CHUNKS = "chunkedgraph"  # a chunked graph checked where it lives (`check`)
PARTITION_RANK = "distpart"  # an MPI rank of the ParMETIS modes (`partition`)
OUT_OF_CORE = "outofcore"  # --out-of-core: a DGL server or trainer (`run`), .npy (`export`)
DGL_PROCESS = "dglprocess"  # any other DGL server or trainer (`run`)

PROGRAMS = (
    CLI, REMOTE, PULL, SERVE, CACHE, CHECK_CHUNKS, PARTITION_RANK, OUT_OF_CORE, DGL_PROCESS
)  # fmt: skip

SAFE_PATH = "-P"  # no working directory (nor script folder) prepended to sys.path


def argv(python: str, program: str, *args: str) -> list[str]:
    """``python -P -m program args...``."""
    return [python, SAFE_PATH, "-m", program, *args]


def command_line(python: str, program: str, *args: str) -> str:
    """:func:`argv` as one shell command line (``kubectl exec ... sh -c``)."""
    return shlex.join(argv(python, program, *args))


def prog(program: str) -> str:
    """The ``prog`` of a program's argument parser (its usage and error lines)."""
    return f"python -m {program}"


def local_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for one of these programs started on this machine (``--transport local``, the
    user-namespace re-run): with ``-P`` the working directory no longer finds a source
    checkout's packages, so the folder this dglrun's were imported from is appended to
    ``PYTHONPATH`` when it is not one of the interpreter's own site folders."""
    if HOME in _site_folders():
        return dict(env)
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if HOME in path:
        return dict(env)
    return {**env, "PYTHONPATH": os.pathsep.join([*path, HOME])}


HOME = str(Path(__file__).resolve().parents[1])  # the folder holding our packages


def _site_folders() -> set[str]:
    folders = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    folders |= set(site.getsitepackages()) | {site.getusersitepackages()}
    return {str(Path(f).resolve()) for f in folders}
