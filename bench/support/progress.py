"""A job's progress as the benchmarks wait on it: the epochs done and whether it trains, from
the typed ``status.progressDetail`` (:func:`podcontract.progress.read`, which takes an older
dglrun's text through its one fallback); ``status.progress`` is only shown."""

from __future__ import annotations

from typing import Any

from launcher.report.eta import TRAIN
from podcontract.progress import read


def epochs_done(status: dict[str, Any]) -> int:
    """The epochs the job's current attempt has trained (0 before training, or unread)."""
    d = read(status).detail
    return d.epochs_done if d is not None else 0


def trains(status: dict[str, Any]) -> bool:
    """dglrun is in its training step, and not done."""
    d = read(status).detail
    return d is not None and d.step_name == TRAIN and d.percentage < 100
