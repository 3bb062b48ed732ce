"""A job's progress drawn as a bar over its epochs: tqdm's when tqdm is installed
(``tqdm.auto``: a widget in a notebook, text in a terminal), else one plain line per change;
with the ETA and the last epoch's metrics once dglrun reports them."""

from __future__ import annotations

import importlib
import sys
from typing import Any

from dgl_operator.client.status import JobProgress


class EpochBar:
    """``update(progress)`` for each reading; the bar's total is the job's epochs once dglrun
    reports them, its description the phase and step (``Training 5/5 train``)."""

    def __init__(self, name: str, out: Any = None) -> None:
        self.name = name
        self.out = out or sys.stderr
        self._bar: Any = None
        self._tqdm: Any = None
        try:  # (an optional dependency, untyped)
            self._tqdm = importlib.import_module("tqdm.auto").tqdm
        except ImportError:
            self._tqdm = None

    def __enter__(self) -> EpochBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()

    def update(self, p: JobProgress) -> None:
        desc = f"{self.name}: {p.phase or 'Pending'}"
        if p.step_name:
            desc += f" {p.step}/{p.steps} {p.step_name}"
        if p.restarts:
            desc += f" (restarts {p.restarts})"
        if p.eta and not p.ended:
            desc += f" ETA {p.eta}"
        if p.problem:
            desc += f" ({p.problem})"
        if self._tqdm is None:
            done = f" epoch {p.epoch}/{p.epochs}" if p.epochs else ""
            shown = "".join(f" {k} {v:g}" for k, v in p.metrics.items() if k != "epoch")
            print(f"{desc}{done}{shown}" + (f": {p.ended}" if p.ended else ""), file=self.out,
                  flush=True)  # fmt: skip
            return
        if self._bar is None:
            self._bar = self._tqdm(total=p.epochs, unit="epoch", desc=desc, file=self.out)
        if p.epochs and self._bar.total != p.epochs:
            self._bar.total = p.epochs
        if p.epoch is not None:
            self._bar.n = min(p.epoch, p.epochs or p.epoch)
        if p.ended == "Succeeded" and self._bar.total:
            self._bar.n = self._bar.total
        self._bar.set_description(desc + (f": {p.ended}" if p.ended else ""), refresh=False)
        if p.metrics:
            self._bar.set_postfix({k: v for k, v in p.metrics.items() if k != "epoch"},
                                  refresh=False)  # fmt: skip
        self._bar.refresh()
