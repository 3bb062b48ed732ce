"""The pod files the operator mounts from the job's ConfigMap (hostfile, partfile).

One line per pod: ``<ip> <port> <pod-name> [slots=N]``. Only the pod name (third column) matters
here. Blank lines and ``#`` comment lines are skipped; names ending in ``launcher`` are ignored
(the original operator's behaviour: the launcher never waits for itself).

The kubelet refreshes ConfigMap volumes lazily, so a file can be missing, empty or short when the
init container starts (the original repository's issue #15). :func:`read_pod_file` reports such
a file as incomplete instead of failing; only a malformed file is an error.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

LAUNCHER_SUFFIX = "launcher"
FORMAT = "<ip> <port> <pod-name> [slots=N]"

# A pod name that can also be a label value (the operator labels each pod
# dgl-replica-name=<pod name>): a DNS-1123 subdomain of at most 63 characters. Nothing in it
# can break the field selector (metadata.name=<pod>) that the watch sends.
MAX_NAME_LENGTH = 63
_POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SLOTS = re.compile(r"slots=([1-9][0-9]*)")


class PodFileError(ValueError):
    """The pod file cannot be used: a malformed line, or it cannot be read at all."""


@dataclass(frozen=True)
class PodFile:
    """What one read of the file found."""

    names: list[str]  # pod names to wait for, in file order (launcher lines left out)
    complete: bool
    why: str = ""  # for an incomplete file: what is missing, for the logs


def _line_error(path: str, lineno: int, line: str, problem: str) -> PodFileError:
    return PodFileError(f"{path} line {lineno}: {problem} (line: {line.strip()!r})")


def parse_pod_file(text: str, path: str = "<pod file>") -> list[str]:
    """The pod names listed in ``text`` (the file's content), launcher names left out.

    Raises :class:`PodFileError` naming ``path`` and the line number for a malformed line or a
    pod listed twice.
    """
    names: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) not in (3, 4):
            raise _line_error(path, lineno, line, f"expected {FORMAT}, got {len(fields)} column(s)")
        ip, port, name = fields[:3]
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise _line_error(path, lineno, line, f"{ip!r} is not an IP address") from None
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise _line_error(path, lineno, line, f"{port!r} is not a port number")
        if len(name) > MAX_NAME_LENGTH or not _POD_NAME.fullmatch(name):
            raise _line_error(
                path,
                lineno,
                line,
                f"{name!r} is not a pod name (lowercase letters, digits, '-' and '.', "
                f"at most {MAX_NAME_LENGTH} characters)",
            )
        if len(fields) == 4 and not _SLOTS.fullmatch(fields[3]):
            raise _line_error(
                path, lineno, line, f"expected slots=<positive integer>, got {fields[3]!r}"
            )
        if name.endswith(LAUNCHER_SUFFIX):
            continue
        if name in seen:
            raise _line_error(
                path, lineno, line, f"pod {name} is already listed on line {seen[name]}"
            )
        seen[name] = lineno
        names.append(name)
    return names


def read_pod_file(path: Path, expected: int | None = None) -> PodFile:
    """Read and parse ``path``; missing, empty or short (fewer than ``expected`` pods) is
    incomplete. Raises :class:`PodFileError` for a malformed file or an unreadable one (a
    directory, no permission, not UTF-8)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return PodFile([], False, "the file does not exist yet")
    except UnicodeDecodeError as e:
        raise PodFileError(f"{path} is not a text file: {e}") from None
    except OSError as e:
        raise PodFileError(f"cannot read {path}: {e.strerror or e}") from None
    names = parse_pod_file(text, str(path))
    if not names:
        return PodFile([], False, "the file lists no pods yet")
    if expected is not None and len(names) < expected:
        return PodFile(names, False, f"the file lists {len(names)} of {expected} pods")
    return PodFile(names, True)
