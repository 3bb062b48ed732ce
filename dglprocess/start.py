"""DGL 2.1's fixed waits at a job's start, taken out (see the package's docstring).

:func:`prepare` is called by the runner in the DGL process, before the script. It imports
nothing: it asks to be told when the script imports the one DGL module it changes, then
changes it before the script sees it (a script that never imports DGL, such as the tests'
stand-ins, starts as fast as without it):

* a server's ``dgl.distributed.rpc_server`` gets a ``time`` whose 3-second wait for the
  trainers' receivers is :data:`RECEIVERS_WAIT`;
* a trainer's ``dgl.distributed.rpc_client.connect_to_server`` first waits (at most
  :data:`LISTEN_TIMEOUT` seconds) until its machine's servers listen.

Anything else is left as DGL has it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
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


SERVER_MODULE = "dgl.distributed.rpc_server"
CLIENT_MODULE = "dgl.distributed.rpc_client"
CONNECT_IMPORTERS = ("dgl.distributed", "dgl.distributed.dist_context")  # DGL 2.1's


def prepare() -> None:
    """Before a DGL server's or trainer's script runs: the module it changes is changed as the
    script imports it (nothing under another DGL, nor for another process)."""
    role = os.environ.get("DGL_ROLE", "")
    if role not in CHANGES or not enabled():
        return
    target, change = CHANGES[role]
    loaded = sys.modules.get(target)
    if loaded is not None:  # (imported already: ``python -m outofcore run``'s patch does)
        change(loaded)
    else:
        sys.meta_path.insert(0, AfterImport(target, change))


def _supported() -> bool:
    """(Read from DGL's package metadata: ``dgl`` imports these modules before it has set
    its ``__version__``.)"""
    try:
        return importlib.metadata.version("dgl").startswith(SUPPORTED)
    except importlib.metadata.PackageNotFoundError:
        return False


def _shorten_receivers_wait(rpc_server: ModuleType) -> None:
    if _supported() and not isinstance(rpc_server.time, _ShortWait):
        rpc_server.time = _ShortWait(rpc_server.time)  # type: ignore[attr-defined]


def _wait_before_connecting(rpc_client: ModuleType) -> None:
    if not _supported():
        return
    connect = rpc_client.connect_to_server

    @functools.wraps(connect)
    def connect_to_server(*args: Any, **kwargs: Any) -> Any:
        wait_for_servers()
        return connect(*args, **kwargs)

    # every name DGL calls it by: those bound by ``from .rpc_client import`` before now too
    for name in (CLIENT_MODULE, *CONNECT_IMPORTERS):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "connect_to_server", None) is connect:
            module.connect_to_server = connect_to_server  # type: ignore[attr-defined]


# DGL_ROLE -> the module changed in that role's process, and how
CHANGES: dict[str, tuple[str, Callable[[ModuleType], None]]] = {
    "server": (SERVER_MODULE, _shorten_receivers_wait),
    "client": (CLIENT_MODULE, _wait_before_connecting),
}


def wait_for_servers() -> None:
    """A trainer's wait for its machine's servers (DGL_IP_CONFIG, DGL_NUM_SERVER), then
    :data:`PEERS_GRACE` for the other machines'."""
    ip_config = os.environ.get("DGL_IP_CONFIG", "")
    if ip_config and Path(ip_config).is_file():
        num_servers = int(os.environ.get("DGL_NUM_SERVER", "1") or 1)
        if wait_for_local_servers(servers_of(ip_config, num_servers)):
            time.sleep(PEERS_GRACE)


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``then(module)`` once ``name`` has been imported (its code ran), before the
    importer gets it; once: the finder leaves ``sys.meta_path`` when it finds the module."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Then(spec.loader, self.then)
        return spec


class _Then(importlib.abc.Loader):
    """A module's own loader, then ``then(module)``; anything else asked of it is the
    loader's (its source for tracebacks)."""

    def __init__(self, loader: Any, then: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._then = then

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._then(module)
