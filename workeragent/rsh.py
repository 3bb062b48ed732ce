"""``python -m workeragent.rsh <host> <command words...>``: mpirun's remote shell (its
``plm_rsh_agent``), through the worker agents instead of ssh or ``kubectl exec``.

mpirun calls its remote shell as ssh would be called: a host, then the words of a command for
a shell there. This one finds the host in ``$DGL_AGENT_HOSTFILE`` (the operator's hostfile:
lines ``<ip> <port> <pod> slots=N``, the port DGL's; blank and ``#`` lines skipped; the host
matched by pod name or IP), reaches its agent on ``$DGL_AGENT_PORT`` (default: the pod
contract's), joins the words with spaces and runs ``sh -c <joined>`` on that host's agent under a
random id, with the token in ``$DGL_AGENT_TOKEN_FILE`` (default: the pod contract's path). The
output (stdout and stderr, as one stream) goes to this process's stdout as it comes; SIGTERM,
SIGINT and SIGHUP are forwarded to the remote process's group; the exit status is the remote
one. An unknown host or an unreadable file exits 2 with a line naming it; an agent that fails
(refused, unreachable) exits 255, as ssh does when it cannot connect.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import threading
from collections.abc import Sequence

import podcontract as pc
from workeragent.client import AgentAddress, AgentClient, AgentError
from workeragent.settings import TokenFileError, read_token

PROG = "dgl-agent-rsh"
HOSTFILE_ENV = "DGL_AGENT_HOSTFILE"
TOKEN_FILE_ENV = "DGL_AGENT_TOKEN_FILE"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CONNECT_FAILED = 255


class RshHostError(Exception):
    """The hostfile cannot be read, is malformed, or does not list the host."""


PORT_ENV = "DGL_AGENT_PORT"


def _agent_port() -> int:
    text = os.environ.get(PORT_ENV) or ""
    if text.isascii() and text.isdigit() and 0 < int(text) < 65536:
        return int(text)
    if text:
        raise RshHostError(f"{PORT_ENV}={text!r} is not a port")
    return pc.AGENT_PORT


def find_host(hostfile: str, host: str, port: int = pc.AGENT_PORT) -> AgentAddress:
    """The agent of ``host`` (a pod name or an IP) the hostfile lists, on ``port`` (the
    hostfile's own port column is DGL's servers')."""
    try:
        with open(hostfile, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise RshHostError(f"hostfile {hostfile}: cannot read it: {why}") from e
    for number, line in enumerate(lines, 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) < 3 or not words[1].isascii() or not words[1].isdigit():
            raise RshHostError(
                f"hostfile {hostfile} line {number}: {line.strip()!r} is not "
                "'<ip> <port> <pod> slots=N'"
            )
        ip, pod = words[0], words[2]
        if host in (pod, ip):
            return AgentAddress(name=pod, ip=ip, port=port)
    raise RshHostError(f"host {host!r} is not in the hostfile {hostfile}")


def _write(data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError):  # (nobody reads: the process still runs on)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def run(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print(f"usage: {PROG} <host> <command words...>", file=sys.stderr)
        return 2
    host, words = argv[0], argv[1:]
    hostfile = os.environ.get(HOSTFILE_ENV)
    if not hostfile:
        print(f"{PROG}: {HOSTFILE_ENV} is not set (the agents' hostfile)", file=sys.stderr)
        return 2
    try:
        address = find_host(hostfile, host, _agent_port())
        token = read_token(os.environ.get(TOKEN_FILE_ENV) or pc.AGENT_TOKEN_PATH)
    except (RshHostError, TokenFileError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    client = AgentClient(address, token)
    proc_id = f"rsh-{secrets.token_hex(8)}"
    started = threading.Event()
    pending: list[str] = []

    def send(name: str) -> None:
        with contextlib.suppress(AgentError):  # (it has ended meanwhile: nothing to stop)
            client.signal(proc_id, name)

    def forward(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if started.is_set():
            threading.Thread(target=send, args=(name,), daemon=True).start()
        else:
            pending.append(name)  # (sent once the remote process exists)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    try:
        client.start(proc_id, ["sh", "-c", " ".join(words)])
        started.set()
        for name in pending:
            send(name)
        code = client.follow(proc_id, 0, _write)
    except AgentError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return CONNECT_FAILED
    with contextlib.suppress(AgentError):
        client.forget(proc_id)
    return code


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
