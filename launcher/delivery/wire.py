"""The partition data path off the API server: what the server and the pullers agree on.

The pod that holds the partitions (the Partitioner; in ``--transport local`` dglrun itself)
serves them over HTTP on podcontract's ``TRANSFER_PORT``; each worker pulls only its own part
straight from it, resuming interrupted files and checking every file's SHA-256. Nothing but
control commands goes through the API server.

Wire contract (version 1). Every ``/v1`` request carries ``Authorization: Bearer <token>``
(the job's token, from the Secret the operator creates; a file here, by default
podcontract's ``TRANSFER_TOKEN_PATH``):

- ``GET /v1/manifest``: ``{"config": rel, "files": {rel: {"size": n, "sha256": hex}},
  "parts": {"0": [rel, ...], ...}}``; a part's list holds the partition config and its own
  files; ``"reused": path`` when the partitions came from the job's storage's cache;
- ``GET /v1/files/<rel>``: one file of the manifest; ``Range: bytes=N-`` resumes (206);
- ``POST /v1/done``: every worker has its part; the server stops;
- ``GET /ready`` (podcontract's ``TRANSFER_READY_PATH``): 200 once serving (no token: the
  kubelet's readiness probe asks it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher import checksums
from launcher.errors import LauncherError
from launcher.partition import output as parts


class TransferError(LauncherError, RuntimeError):
    """A transfer failed; ``str()`` is the one line a user sees."""


def read_token(path: str | Path) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as e:
        raise TransferError(f"cannot read the transfer token {path}: {e.strerror}") from e
    if not token:
        raise TransferError(f"the transfer token {path} is empty")
    return token


def build_manifest(
    pset: parts.PartitionSet, files: dict[str, tuple[int, str]] | None = None
) -> dict[str, Any]:
    """The manifest a server offers for a partition set: the partition config and each
    part's folder, nothing else the folder holds; ``files``: their ``(size, sha256)`` when
    known (verified just before), else every file is hashed once."""
    files = checksums.manifest(pset.root) if files is None else files
    config = pset.config.name
    by_part = {}
    for i in range(pset.num_parts):
        prefix = f"{pset.part_dir(i)}/"
        by_part[str(i)] = [config, *sorted(k for k in files if k.startswith(prefix))]
    listed = {rel for rels in by_part.values() for rel in rels}
    return {
        "config": config,
        "files": {
            k: {"size": size, "sha256": sha} for k, (size, sha) in files.items() if k in listed
        },
        "parts": by_part,
    }
