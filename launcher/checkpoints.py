"""Checkpoints: what a training entry point saves, and which one a restarted job resumes from.

The contract (docs/user-guide.md, next to DGL's env contract). dglrun gives every trainer
``$DGLRUN_CHECKPOINT_DIR`` (on the job's storage: it outlives the pods). After each epoch the
entry point's rank 0 saves ``epoch-<n>.pt`` there, ``n`` being the number of epochs done, in
two renames: the checkpoint is written under a temporary name and renamed into place, then its
SHA-256 is written to ``epoch-<n>.pt.sha256`` the same way. :func:`saving` does exactly that
(``with saving(folder, n) as tmp: torch.save(state, tmp)``) and keeps the newest two.

Before training, dglrun (:func:`choose`) takes the newest checkpoint whose content matches its
digest; one that does not (a truncated or overwritten file) is reported and the one before it
taken, and one without a digest was never finished and does not count. Every trainer then
gets ``$DGLRUN_RESUME_FROM`` (the file) and ``$DGLRUN_RESUME_EPOCH`` (``n``: the epoch to run
next, 0-based); without them it starts from epoch 0. A digest proves the file whole, not who
wrote it: a trainer that refuses to load it (weights-only: it could run code) ends with one
line naming it and podcontract's ``REFUSED_EXIT_CODE``, and the job fails at once
(launcher/workers/refusal.py).

Standard library only: dglrun checks checkpoints without torch, and entry points may import
:func:`saving` wherever dglrun is installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from launcher.checksums import file_sha256 as sha256

CHECKPOINT_DIR_ENV = "DGLRUN_CHECKPOINT_DIR"
RESUME_FROM_ENV = "DGLRUN_RESUME_FROM"
RESUME_EPOCH_ENV = "DGLRUN_RESUME_EPOCH"
DIGEST = ".sha256"
KEEP = 2  # complete checkpoints kept: the newest, and one to fall back on
_NAME = re.compile(r"^epoch-(\d+)\.pt$")


def file_name(epoch: int) -> str:
    return f"epoch-{epoch}.pt"


@dataclass(frozen=True)
class Checkpoint:
    epoch: int  # epochs done: the epoch to run next
    path: Path


@dataclass
class Choice:
    """The checkpoint to resume from (None: start from epoch 0), and why newer ones were not
    taken (one line each, naming the file)."""

    resume: Checkpoint | None = None
    skipped: list[str] = field(default_factory=list)


def _found(folder: Path) -> list[Checkpoint]:
    """Every ``epoch-<n>.pt`` in ``folder``, newest first."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        m = _NAME.match(name)
        if m:
            found.append(Checkpoint(int(m.group(1)), folder / name))
    return sorted(found, key=lambda c: c.epoch, reverse=True)


def _problem(c: Checkpoint) -> str | None:
    """Why ``c`` cannot be resumed from, or None if its content matches its digest."""
    digest = c.path.with_name(c.path.name + DIGEST)
    try:
        want = digest.read_text().strip()
    except FileNotFoundError:
        return f"{c.path.name} has no {digest.name}: it was never finished"
    except OSError as e:
        return f"{digest.name} cannot be read: {e.strerror}"
    try:
        size, got = c.path.stat().st_size, sha256(c.path)
    except OSError as e:
        return f"{c.path.name} cannot be read: {e.strerror}"
    if got != want:
        return (
            f"{c.path.name} ({size} bytes) does not match its SHA-256 in {digest.name}: "
            "truncated or overwritten"
        )
    return None


def choose(folder: Path, num_epochs: int | None = None) -> Choice:
    """The newest checkpoint in ``folder`` that is whole (and not past ``num_epochs``)."""
    choice = Choice()
    for c in _found(folder):
        if num_epochs is not None and c.epoch > num_epochs:
            choice.skipped.append(f"{c.path.name} is past --num-epochs {num_epochs}")
            continue
        why = _problem(c)
        if why is None:
            choice.resume = c
            return choice
        if c.path.with_name(c.path.name + DIGEST).exists():
            choice.skipped.append(why)
        # (no digest: the trainer stopped while saving it; not worth a warning)
    return choice


def newest_finished(folder: Path) -> int:
    """The epochs done of the newest checkpoint whose digest was written (0: none); cheap
    (names only, no SHA-256): what an epoch boundary is watched by."""
    for c in _found(folder):
        if c.path.with_name(c.path.name + DIGEST).exists():
            return c.epoch
    return 0


@contextlib.contextmanager
def saving(folder: str | Path, epoch: int, keep: int = KEEP) -> Iterator[Path]:
    """``with saving(folder, n) as tmp: torch.save(state, tmp)`` commits ``epoch-<n>.pt``
    when the block ends without an exception (see the module's contract) and removes all but
    the newest ``keep`` checkpoints; on an exception nothing is left behind."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / file_name(epoch)
    tag = secrets.token_hex(4)
    tmp = folder / f".{final.name}.{tag}.tmp"
    try:
        yield tmp
        digest = sha256(tmp)
        _fsync(tmp)
        os.replace(tmp, final)
        tmp_digest = folder / f".{final.name}{DIGEST}.{tag}.tmp"
        tmp_digest.write_text(digest + "\n")
        _fsync(tmp_digest)
        os.replace(tmp_digest, final.with_name(final.name + DIGEST))
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _prune(folder, epoch, keep)


def _prune(folder: Path, epoch: int, keep: int) -> None:
    """Keep the newest ``keep`` whole checkpoints up to ``epoch``; remove the rest: older
    ones, unfinished ones, and any past ``epoch`` (left by an attempt this run resumed
    before)."""
    kept = 0
    for c in _found(folder):
        digest = c.path.with_name(c.path.name + DIGEST)
        if c.epoch <= epoch and kept < keep and digest.exists():
            kept += 1
            continue
        for path in (c.path, digest):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
