"""Where a job keeps what must outlive its pods: results, checkpoints, cached partitions.

In a DGLJob with ``spec.storage`` the operator mounts a PersistentVolumeClaim in every pod of
the job at the same path and tells dglrun the folder to use (``$DGL_OPERATOR_STORAGE``) and the
run's name (``$DGL_OPERATOR_RUN_NAME``: ``<job name>-<first 8 characters of its uid>``, which
every restart of the job shares and a new job of the same name does not). With ``--transport
local`` any folder does (``--storage``). The layout::

    <storage>/runs/<run>/output/        the training entry point's $DGLRUN_OUTPUT_DIR (model,
                                        metrics.json), and dglrun's summary (dglrun.json)
    <storage>/runs/<run>/logs/          each dglrun's log, one file per pod and attempt
    <storage>/runs/<run>/checkpoints/   $DGLRUN_CHECKPOINT_DIR (launcher/checkpoints.py)
    <storage>/partitions/<key>/         partitions by the hash of their inputs
                                        (launcher/partition_cache.py)

Standard library only (dglrun's layer).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from podcontract import RUN_OUTPUT, STORAGE_RUNS

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StorageError(RuntimeError):
    """The storage cannot be used; ``str()`` names the folder and what to change."""


def check_run_name(name: str) -> str:
    if not _RUN_NAME.match(name):
        raise ValueError(
            f"{name!r} is not a run name (letters, digits, '.', '_' and '-', at most 128)"
        )
    return name


@dataclass(frozen=True)
class Storage:
    root: Path
    run: str
    share_partitions: bool = False

    @property
    def run_dir(self) -> Path:
        return self.root / STORAGE_RUNS / self.run

    @property
    def output(self) -> Path:
        return self.run_dir / RUN_OUTPUT

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def partitions(self) -> Path:
        return self.root / "partitions"

    def prepare(self) -> None:
        """Make the folders this run writes to, or say why they cannot be made."""
        if not self.root.is_dir():
            raise StorageError(
                f"the storage {self.root} does not exist (in a DGLJob: spec.storage's claim is "
                "mounted there)"
            )
        for folder in (self.output, self.logs, self.checkpoints, self.partitions):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StorageError(_unwritable(folder, e)) from e
            if not os.access(folder, os.W_OK | os.X_OK):
                raise StorageError(_unwritable(folder, PermissionError(13, "Permission denied")))


def _unwritable(folder: Path, e: OSError) -> str:
    return (
        f"the storage folder {folder} cannot be written by this pod's user (uid {os.getuid()}): "
        f"{e.strerror}; give the claim's root folder to that user (e.g. the pod templates' "
        "securityContext.fsGroup, where the volume supports it)"
    )
