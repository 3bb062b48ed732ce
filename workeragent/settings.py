"""The agent's flags: ``python -m workeragent [flags] [-- CMD...]``, parsed into AgentSettings.

Everything has a default that fits a worker pod (the pod contract's port, token file and orphan
grace), so the pod template runs the agent with no flag at all; tests give ``--port 0`` (a free
port, which the agent prints) and their own token file. A bad value exits with status 2 and one
line naming the flag (no usage block, no traceback).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import podcontract as pc
from podcontract.quantity import parse_quantity

PROG = "dgl-agent"
MiB = 1 << 20
DEFAULT_BUFFER = 8 * MiB  # each process's last output kept for a reader that comes back
MIN_BUFFER = 4096


@dataclass(frozen=True)
class AgentSettings:
    """What the agent serves on and with.

    ``orphan_grace``: seconds without an authenticated request after which, while processes
    run, the agent stops them all (dglrun is gone; 0 disables it). ``buffer_bytes``: the output
    kept per process. ``workdir``: where relative paths (a process's cwd, the files API) resolve.
    ``command``: the pod template's own worker command, started at boot (may be empty).
    """

    host: str = "0.0.0.0"
    port: int = pc.AGENT_PORT
    token_file: str = pc.AGENT_TOKEN_PATH
    orphan_grace: float = pc.AGENT_ORPHAN_GRACE
    buffer_bytes: int = DEFAULT_BUFFER
    workdir: str = field(default_factory=os.getcwd)
    command: tuple[str, ...] = ()


class AgentArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line (``dgl-agent: argument --port: ...``), status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: {message}\n")


def _port(value: str) -> int:
    if not value.isascii() or not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0 to 65535; 0: any free one)")
    return int(value)


def _seconds(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not math.isfinite(x) or x < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds (0 or more)")
    return x


def _bytes(value: str) -> int:
    try:
        n = int(parse_quantity(value))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    if n < MIN_BUFFER:
        raise argparse.ArgumentTypeError(f"{value!r} is less than {MIN_BUFFER} bytes")
    return n


def _nonempty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def parser() -> AgentArgumentParser:
    defaults = AgentSettings()
    p = AgentArgumentParser(
        prog=PROG,
        description=(
            "The worker pod's agent: runs processes for dglrun over HTTP (token-authenticated) "
            "and keeps their output for it. After `--`, a command to start at boot (the pod's "
            "own worker command; its output goes to the agent's)."
        ),
        usage=f"{PROG} [flags] [-- CMD...]",
    )
    p.add_argument("--host", type=_nonempty, default=defaults.host, help="address to listen on")
    p.add_argument(
        "--port", type=_port, default=defaults.port, help="port to listen on (0: a free one)"
    )
    p.add_argument(
        "--token-file",
        type=_nonempty,
        default=defaults.token_file,
        help="the job's token: every request but the health probe's must carry it",
    )
    p.add_argument(
        "--orphan-grace",
        type=_seconds,
        default=defaults.orphan_grace,
        help="stop every process after this many seconds with no request from dglrun (0: never)",
    )
    p.add_argument(
        "--output-buffer",
        type=_bytes,
        default=defaults.buffer_bytes,
        help="output kept per process, in bytes (8Mi, 65536)",
    )
    p.add_argument(
        "--workdir", type=_nonempty, default=None, help="relative paths resolve here (the cwd)"
    )
    return p


def parse(argv: Sequence[str]) -> AgentSettings:
    """The settings ``argv`` (without the program name) asks for; exits 2 on a bad value."""
    argv = list(argv)
    command: tuple[str, ...] = ()
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], tuple(argv[cut + 1 :])
    p = parser()
    ns = p.parse_args(argv)
    workdir = os.path.abspath(ns.workdir) if ns.workdir is not None else os.getcwd()
    if not os.path.isdir(workdir):
        p.error(f"argument --workdir: {workdir} is not a directory")
    return AgentSettings(
        host=ns.host,
        port=ns.port,
        token_file=ns.token_file,
        orphan_grace=ns.orphan_grace,
        buffer_bytes=ns.output_buffer,
        workdir=workdir,
        command=command,
    )


class TokenFileError(Exception):
    """The token file cannot be read or is empty (the message names it)."""


def read_token(path: str) -> str:
    """The job's token, from the Secret's file (surrounding whitespace dropped)."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except FileNotFoundError as e:
        raise TokenFileError(f"token file {path}: no such file") from e
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise TokenFileError(f"token file {path}: cannot read it: {why}") from e
    if not token:
        raise TokenFileError(f"token file {path}: empty")
    return token
