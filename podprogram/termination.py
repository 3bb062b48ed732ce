"""The container's termination message: the one line the pod's status shows after the program
ended, which the operator quotes in the job's Failed condition."""

from __future__ import annotations

import contextlib
import os

# Where Kubernetes reads a container's termination message (the pod's
# terminationMessagePath, Kubernetes' default).
TERMINATION_LOG = "/dev/termination-log"
MAX_BYTES = 4096  # what the kubelet keeps of it


def write_termination_message(message: str, path: str | os.PathLike[str] = TERMINATION_LOG) -> None:
    """Write ``message`` (its first 4096 bytes) where the kubelet reads it, replacing what was
    there; nothing outside a pod (no such file) and nothing on a write error."""
    if not os.path.exists(path):
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, message.encode()[:MAX_BYTES])
        finally:
            os.close(fd)
