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
                                        (launcher/storage/cache.py)

In a DGLJob the claim is mounted at ``/dgl_storage`` and ``<storage>`` is
``/dgl_storage[/<spec.storage.path>]``: the mount must exist (its absence means the claim is
not mounted, and nothing is written in the container's own filesystem instead), the folders
under it are made by the first dglrun of the job that needs them, a new claim's included. A
folder dglrun makes gets the permissions of the folder it is made in (umask aside), so that
every pod user who may write the claim's root (an fsGroup, a shared uid) may write it too;
a folder that exists is never changed, and nothing on the storage is ever deleted here.

Standard library only (dglrun's layer).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import LauncherError
from podcontract import RUN_OUTPUT, STORAGE_DIR, STORAGE_RUNS

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StorageError(LauncherError, RuntimeError):
    """The storage cannot be used; ``str()`` names the folder and what to change."""


def check_run_name(name: str) -> str:
    if not _RUN_NAME.match(name):
        raise ValueError(
            f"{name!r} is not a run name (letters, digits, '.', '_' and '-', at most 128)"
        )
    return name


def claim_mount(root: Path) -> Path | None:
    """Where a DGLJob's claim is mounted (``/dgl_storage``) when ``root`` is that folder or one
    below it (``spec.storage.path``): the folder that must exist. None for any other folder."""
    mount = Path(STORAGE_DIR)
    return mount if _within(mount, root) else None


def _within(top: Path, path: Path) -> bool:
    """``path`` is ``top`` or a folder below it (lexically, and without ``..``)."""
    return path == top or (top in path.parents and ".." not in path.parts)


@dataclass(frozen=True)
class Storage:
    """``root``: the folder this run keeps things in. ``mount``: the folder that must exist
    already, ``root`` itself or a folder above it (in a DGLJob the claim's mount point; the
    folders from it down to ``root`` are made when missing). None: ``root`` must exist (a
    folder given with ``--storage``). ``cache_limit``: the bytes the partition cache may hold
    over every graph (None: its default, launcher/storage/cache.py)."""

    root: Path
    run: str
    share_partitions: bool = False
    mount: Path | None = None
    cache_limit: int | None = None

    def __post_init__(self) -> None:
        if self.mount is not None and not _within(self.mount, self.root):
            raise ValueError(f"the storage {self.root} is not inside {self.mount}")

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
        """Make the folders this run writes to (``root`` too, when it is below ``mount``), or
        say why they cannot be made. Folders and files that exist are left as they are."""
        must = self.mount or self.root
        if not must.is_dir():
            made = f"; {self.root} is made in it" if must != self.root else ""
            raise StorageError(
                f"the storage {must} does not exist (in a DGLJob: spec.storage's claim is "
                f"mounted there{made})"
            )
        _make(self.root)
        for folder in (self.output, self.logs, self.checkpoints, self.partitions):
            _make(folder)
            if not os.access(folder, os.W_OK | os.X_OK):
                raise StorageError(_unwritable(folder, PermissionError(13, "Permission denied")))


def _make(folder: Path) -> None:
    """``folder`` and its missing parents, each with the permissions of the nearest folder
    above it that exists (chmod after mkdir: the umask does not narrow them). A folder another
    pod made meanwhile is used as it is; a file in the way is named."""
    missing = []
    at = folder
    try:
        while not at.is_dir():
            missing.append(at)
            at = at.parent
        mode = stat.S_IMODE(at.stat().st_mode)
    except OSError as e:  # (a folder this user may not even look into)
        raise StorageError(_unwritable(at, e)) from e
    for new in reversed(missing):
        try:
            new.mkdir()
        except FileExistsError:
            if new.is_dir():
                continue  # (another pod of the job made it first)
            raise StorageError(
                f"the storage folder {new} cannot be made: a file of that name is in the way"
            ) from None
        except OSError as e:
            raise StorageError(_unwritable(new, e)) from e
        with contextlib.suppress(OSError):  # (a volume that ignores modes: access says)
            os.chmod(new, mode)


def _unwritable(folder: Path, e: OSError) -> str:
    return (
        f"the storage folder {folder} cannot be written by this pod's user (uid {os.getuid()}): "
        f"{e.strerror}; give the claim's root folder to that user (e.g. the pod templates' "
        "securityContext.fsGroup, where the volume supports it)"
    )
