"""The operator's hostfile and DGL's ip_config (pure functions)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from launcher.errors import LauncherError

_ORDINAL = re.compile(r"-(\d+)$")


class HostfileError(LauncherError, ValueError):
    pass


@dataclass(frozen=True)
class Host:
    ip: str
    port: int
    name: str
    slots: int = 1


def parse_hostfile(text: str, source: str = "hostfile") -> list[Host]:
    """``<ip> <port> <pod> [slots=N]`` lines, sorted by the pod's numeric suffix
    (worker-2 before worker-10, whatever the file's order)."""
    hosts: list[Host] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 3:
            raise HostfileError(
                f"{source}:{lineno}: expected '<ip> <port> <pod> [slots=N]': {raw!r}"
            )
        ip, port_text, name = parts[:3]
        slots = 1
        for extra in parts[3:]:
            key, _, value = extra.partition("=")
            if key == "slots" and value.isdigit() and int(value) > 0:
                slots = int(value)
            else:
                raise HostfileError(f"{source}:{lineno}: unexpected field {extra!r}")
        if not port_text.isdigit():
            raise HostfileError(f"{source}:{lineno}: port {port_text!r} is not a number")
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise HostfileError(
                f"{source}:{lineno}: {ip!r} is not an IP address (a pod without an IP has no "
                "line in the operator's hostfile)"
            ) from None
        hosts.append(Host(ip, int(port_text), name, slots))
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise HostfileError(f"{source}: a pod is listed twice: {names}")
    return sorted(hosts, key=_ordinal_key)


def _ordinal_key(host: Host) -> tuple[int, str]:
    m = _ORDINAL.search(host.name)
    return (int(m.group(1)) if m else -1, host.name)


def ip_config(hosts: list[Host]) -> str:
    """DGL's ip_config: one ``<ip> <port>`` line per machine (it accepts nothing more)."""
    return "".join(f"{h.ip} {h.port}\n" for h in hosts)
