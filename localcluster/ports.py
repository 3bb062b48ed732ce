"""Ports for the servers the local cluster and the tests start, picked before they listen.

Not the kernel's ``bind(("127.0.0.1", 0))``: that port lies in the ephemeral range, where
every process's own ``bind(0)``, ``listen()`` without a bind and outgoing connection takes
its ports too. A port seen free there and closed is up for grabs until the server binds it,
seconds later for a partitioner (CI saw ``cannot listen on 0.0.0.0:41601: Address already in
use``, an odd port: the parity Linux gives ``bind(0)``). So a port is picked below that range
(and below Kubernetes' NodePort range), where the kernel gives none out by itself, and never
twice in one process (the cluster picks three before any binds).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
FLOOR = 20000  # above the ports of well-known servers and of Kubernetes' own (10250 ...)
CEILING = 30000  # Kubernetes' NodePort range starts here
ATTEMPTS = 200

_given: set[int] = set()
_random = random.Random()  # (its own: a test that seeds the module's does not repeat ports)


def ephemeral_range(path: Path = EPHEMERAL) -> tuple[int, int]:
    """The kernel's range for ports it picks by itself (Linux's default when unreadable)."""
    try:
        low, high = (int(word) for word in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port(path: Path = EPHEMERAL) -> int:
    """A TCP port no socket is bound to now, outside the ephemeral range, not given before."""
    low, _ = ephemeral_range(path)
    top = min(CEILING, low)
    if top - FLOOR < 1000:
        raise RuntimeError(
            f"{path}: the ephemeral range starts at {low}, leaving fewer than 1000 ports "
            f"from {FLOOR} below it to pick servers' ports from"
        )
    for _ in range(ATTEMPTS):
        port = _random.randrange(FLOOR, top)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))  # (conflicts with a socket on any address)
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {FLOOR}-{top - 1} after {ATTEMPTS} tries")
