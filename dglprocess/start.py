"""DGL 2.1's fixed waits at a job's start, taken out (see the package's docstring).

:func:`prepare` is called by the runner in the DGL process, before the script: a server's
``dgl.distributed.rpc_server`` gets a ``time`` whose 3-second wait for the trainers'
receivers is :data:`RECEIVERS_WAIT`; a trainer waits (at most :data:`LISTEN_TIMEOUT` seconds)
until its machine's servers listen. Anything else is left as DGL has it.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SUPPORTED = "2.1."  # the DGL versions whose start this module knows
SWITCH = "DGL_OPERATOR_FAST_START"  # "0": run as DGL starts (the bench's baseline)
DGL_RECEIVERS_WAIT = 3  # DGL 2.1 rpc_server.start_server's sleep before connecting back
RECEIVERS_WAIT = 0.25  # what a server waits instead (a trainer listens right after registering)
LISTEN_TIMEOUT = 120.0  # a trainer waits no longer for its servers (then DGL retries as usual)
# Then a trainer gives the other machines' servers, which it cannot see, this long to listen
# too: they started at the same moment (a later one costs DGL's 3 s retry, as before)
PEERS_GRACE = 1.0
POLL = 0.05
_LISTEN = "0A"  # a socket's state in /proc/net/tcp: TCP_LISTEN


class _ShortWait:
    """``time`` for ``dgl.distributed.rpc_server``: its one wait of :data:`DGL_RECEIVERS_WAIT`
    seconds takes :data:`RECEIVERS_WAIT`; every other call is the module's."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def sleep(self, seconds: float) -> None:
        self._real.sleep(RECEIVERS_WAIT if seconds == DGL_RECEIVERS_WAIT else seconds)


def listening(
    tables: Iterable[Path] = (Path("/proc/net/tcp"), Path("/proc/net/tcp6")),
) -> set[tuple[str, int]]:
    """The (address, port) of every listening TCP socket of this network namespace."""
    found: set[tuple[str, int]] = set()
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            found.add((_address(address), int(port, 16)))
    return found


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:  # IPv4, in the host's byte order
        return socket.inet_ntoa(struct.pack("=I", int.from_bytes(raw, "big")))
    words = [struct.pack("=I", int.from_bytes(raw[i : i + 4], "big")) for i in range(0, 16, 4)]
    return socket.inet_ntop(socket.AF_INET6, b"".join(words))


def servers_of(ip_config: str, num_servers: int) -> list[set[tuple[str, int]]]:
    """Each machine's server addresses, from DGL's ip_config (``<ip> <port>`` lines; server k
    of a machine binds port + k)."""
    machines = []
    for line in Path(ip_config).read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            port = int(fields[1])
            machines.append({(fields[0], port + k) for k in range(num_servers)})
    return machines


def is_local(address: str) -> bool:
    """Whether ``address`` is one of this network namespace's (it can be bound)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
    except OSError:
        return False
    return True


def wait_for_local_servers(
    machines: list[set[tuple[str, int]]],
    timeout: float = LISTEN_TIMEOUT,
    look: Callable[[], set[tuple[str, int]]] = listening,
) -> bool:
    """Until every server of a machine whose address is this namespace's listens: True; False
    after ``timeout`` seconds, or at once when no machine's address is local (the servers run
    elsewhere: nothing to wait for here)."""
    mine = [m for m in machines if m and is_local(next(iter(m))[0])]
    if not mine:
        return False
    deadline = time.monotonic() + timeout
    while True:
        seen = look()
        if any(m <= seen for m in mine):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)


def enabled(env: dict[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get(SWITCH, "1") != "0"


def prepare() -> None:
    """Before a DGL server's or trainer's script runs: the server patched, the trainer waiting
    for its machine's servers (nothing under another DGL, nor for another process)."""
    role = os.environ.get("DGL_ROLE")
    if role not in ("server", "client") or not enabled():
        return
    try:  # (a trainer's imports overlap its servers' start; a server's DGL is patched)
        import dgl
        from dgl.distributed import rpc_server
    except ImportError:  # no DGL here: the script runs as it is, and says so itself
        return
    if not dgl.__version__.startswith(SUPPORTED):
        return
    if role == "server":
        if not isinstance(rpc_server.time, _ShortWait):
            rpc_server.time = _ShortWait(rpc_server.time)
        return
    ip_config = os.environ.get("DGL_IP_CONFIG", "")
    if ip_config and Path(ip_config).is_file():
        num_servers = int(os.environ.get("DGL_NUM_SERVER", "1") or 1)
        if wait_for_local_servers(servers_of(ip_config, num_servers)):
            time.sleep(PEERS_GRACE)
