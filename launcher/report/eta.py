"""How far a dglrun is, how long it has left, and the last epoch's metrics: the values of
``status.progressDetail`` (:mod:`podcontract.progress`), from the same phases and lines as
the progress text (no I/O; the clock is injected).

Each step's estimate comes from what measures it:

* **partition**: the time plan's model (:mod:`launcher.plans.time`, given with :meth:`expect`),
  then the pace of distpart's steps as they end (from when its ranks were up); past its
  estimate, none;
* **dispatch**: the bytes pulled so far and their rate;
* **train**: the epochs measured so far: the wall time between the first and the last epoch
  line; with one epoch line, the geometric mean of its own ``time <s>s`` (a lower bound: it
  leaves out what the trainer does after the epoch before it prints, such as evaluating) and
  the time from the trainers' first output to it (an upper bound: it has their setup); the
  current epoch's elapsed time is taken off;
* the other steps (deliver, configure): none.

``epochsDone`` of ``epochs`` counts the epoch lines (as the text's ``epoch 3/10`` does) of
``--num-epochs``, known from the start: the readers need not parse the text for them.

The job's estimate is the current step's when it is the last one (train); before, the steps
still to come have none yet, and the job's is left out rather than made up. ``percentage``
counts the steps done, the current one by its own measure (its share of the time estimated,
of the bytes, of the epochs).

Trainer lines give the metrics: ``epoch <n>``, and after it ``loss <x>``, ``val_acc <x>``,
``test_acc <x>`` (as the example prints them), and the samples per second from ``nodes <n>
... time <s>s`` (summed over the trainers) or DGL's ``Speed (samples/sec) <x>``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from launcher.plans import time as timeplan
from podcontract.progress import (
    EPOCH,
    LOSS,
    SAMPLES_PER_SECOND,
    TEST_ACCURACY,
    VAL_ACCURACY,
    ProgressDetail,
)

PARTITION, DISPATCH, TRAIN = "partition", "dispatch", "train"
_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
METRIC_WORDS = {
    # (the example's "loss 0.41 (all trainers 0.40)": the last number is every trainer's)
    LOSS: re.compile(rf"\bloss[ =:]+{_NUM}(?:\s*\(all trainers {_NUM}\))?", re.IGNORECASE),
    VAL_ACCURACY: re.compile(rf"\bval(?:idation)?[_ ]acc(?:uracy)?[ =:]+{_NUM}", re.IGNORECASE),
    TEST_ACCURACY: re.compile(rf"\btest[_ ]acc(?:uracy)?[ =:]+{_NUM}", re.IGNORECASE),
}
NODES_TIME = re.compile(rf"\bnodes {_NUM}\b.*?\btime {_NUM}s\b")
TRUST_PACE = 0.3
SPEED = re.compile(rf"samples/sec\)?[ =:|]*{_NUM}", re.IGNORECASE)


@dataclass
class _Step:
    k: int = 0
    total: int = 0
    name: str = ""
    started: float = 0.0


@dataclass
class Eta:
    num_epochs: int
    now: Callable[[], float] = time.monotonic
    _step: _Step = field(default_factory=_Step)
    _plan: timeplan.Estimate | None = None  # the partition's, from the time plan
    _ended: set[str] = field(default_factory=set)  # distpart's steps ended
    _distpart_since: float | None = None  # when distpart's ranks were up
    _paced: float | None = None  # partition: the total its pace gives
    _bytes: tuple[int, int] = (0, 0)
    _bytes_since: float | None = None  # when the first bytes were seen ...
    _first_done: int = 0  # ... and how many (the rate counts from there)
    _epochs: list[tuple[int, float]] = field(default_factory=list)  # (epochs done, when)
    _epoch_seconds: float | None = None  # the first epoch's own time, as its trainer said
    _trainers_since: float | None = None  # the trainers' first line in this step
    _metrics: dict[str, float] = field(default_factory=dict)
    _rates: dict[str, float] = field(default_factory=dict)  # trainer -> samples per second
    _share: float = 0.0  # the current step's share done, as last shown (never goes back)

    def step(self, k: int, total: int, name: str) -> None:
        self._step = _Step(k, total, name, self.now())
        self._share = 0.0
        self._ended, self._paced, self._distpart_since = set(), None, None
        self._bytes, self._bytes_since, self._first_done = (0, 0), None, 0
        self._epochs, self._epoch_seconds, self._trainers_since = [], None, None

    def expect(self, plan: timeplan.Estimate) -> None:
        """The time plan's estimate of the partition step (this one or one to come)."""
        self._plan = plan

    def partition_line(self, text: str) -> bool:
        """A partitioner's line; True when it ended one of distpart's steps."""
        if self._step.name != PARTITION:
            return False
        if self._distpart_since is None and timeplan.started(text):
            self._distpart_since = self.now()
        name = timeplan.step_ended(text)
        if name is None or name in self._ended:
            return False
        self._ended.add(name)
        plan = self._plan
        edges = plan.size.edges if plan is not None else 0
        share = timeplan.share_done(plan.partitioner if plan else "", edges, self._ended)
        if share > 0:
            begun = self._distpart_since or self._step.started
            paced = (begun - self._step.started) + (self.now() - begun) / share
            # (the first steps' pace is noisy: the model keeps a say until TRUST_PACE is done)
            w = 1.0 if plan is None else min(1.0, share / TRUST_PACE)
            self._paced = w * paced + (1 - w) * (plan.seconds if plan else 0.0)
        return True

    def pulled(self, done: int, total: int) -> None:
        if self._bytes_since is None and done > 0:
            self._bytes_since, self._first_done = self.now(), done
        self._bytes = (done, total)

    def trainer_line(self) -> None:
        """A trainer's line that is not an epoch's (the first one of the step tells when the
        trainers came up)."""
        if self._trainers_since is None:
            self._trainers_since = self.now()

    def epoch(self, done: int, label: str, text: str) -> bool:
        """A trainer's epoch line (``done`` epochs so far, as the text counts them); True when
        it changed the metrics."""
        if not self._epochs or done > self._epochs[-1][0]:
            self._epochs.append((done, self.now()))
        if len(self._epochs) == 1 and self._epoch_seconds is None:
            m = NODES_TIME.search(text)
            self._epoch_seconds = float(m.group(2)) if m else None
        return self._read_metrics(done, label, text)

    def _read_metrics(self, done: int, label: str, text: str) -> bool:
        before = dict(self._metrics)
        self._metrics[EPOCH] = float(done)
        for name, pattern in METRIC_WORDS.items():
            if m := pattern.search(text):
                self._metrics[name] = float(m.groups()[-1] or m.group(1))
        if (m := NODES_TIME.search(text)) and float(m.group(2)) > 0:
            self._rates[label] = float(m.group(1)) / float(m.group(2))
        elif m := SPEED.search(text):
            self._rates[label] = float(m.group(1))
        if self._rates:
            self._metrics[SAMPLES_PER_SECOND] = round(sum(self._rates.values()), 1)
        return self._metrics != before

    # -- the estimates ------------------------------------------------------------------------

    def _partition(self, elapsed: float) -> tuple[float | None, float]:
        plan = self._plan.seconds if self._plan is not None else None
        total = self._paced if self._paced is not None else plan
        if total is None or elapsed > total:
            return None, 0.0
        return total - elapsed, elapsed / total if total else 0.0

    def _dispatch(self) -> tuple[float | None, float]:
        done, total = self._bytes
        if total <= 0:
            return None, 0.0
        share = done / total
        since = self._bytes_since
        if since is None or done <= self._first_done:
            return None, share
        rate = (done - self._first_done) / max(self.now() - since, 1e-6)
        return (total - done) / rate, share

    def _train(self) -> tuple[float | None, float]:
        if not self._epochs:
            return None, 0.0
        (first, t0), (done, t1) = self._epochs[0], self._epochs[-1]
        share = done / self.num_epochs if self.num_epochs else 0.0
        if done > first:
            per = (t1 - t0) / (done - first)
        else:
            # One epoch: its wall time lies between its own time (without what the trainer
            # did after it, such as evaluating) and the time since the trainers' first output
            # (with their setup): the geometric mean of the two bounds, or the one known.
            since = self._trainers_since if self._trainers_since is not None else None
            upper = t0 - since if since is not None and since < t0 else None
            lower = self._epoch_seconds
            if upper is not None and lower is not None:
                per = math.sqrt(max(lower, 0.0) * max(upper, lower))
            else:
                per = lower if lower is not None else upper or (t0 - self._step.started)
        left = max(self.num_epochs - done, 0)
        return max(left * per - (self.now() - t1), 0.0), share

    def detail(self) -> ProgressDetail:
        s = self._step
        if not s.name:
            return ProgressDetail(metrics=dict(self._metrics), epochs=self.num_epochs)
        elapsed = self.now() - s.started
        if s.name == PARTITION:
            remaining, share = self._partition(elapsed)
        elif s.name == DISPATCH:
            remaining, share = self._dispatch()
        elif s.name == TRAIN:
            remaining, share = self._train()
        else:
            remaining, share = None, 0.0
        self._share = share = max(self._share, min(share, 1.0))
        step_left = None if remaining is None else round(remaining)
        return ProgressDetail(
            step=s.k,
            steps=s.total,
            step_name=s.name,
            percentage=int(100 * (s.k - 1 + share) / s.total) if s.total else 0,
            step_remaining=step_left,
            remaining=step_left if s.k == s.total else None,
            metrics=dict(self._metrics),
            epochs_done=self.epochs_done,
            epochs=self.num_epochs,
        )

    @property
    def epochs_done(self) -> int:
        """The epochs trained so far in this step (the text's ``epoch <done>/<total>``)."""
        return min(self._epochs[-1][0], self.num_epochs) if self._epochs else 0

    def finished(self, done: bool) -> ProgressDetail:
        """The detail once dglrun is over: done (100%, nothing left) or not (no estimates)."""
        d = self.detail()
        if done:
            return replace(d, step=d.steps, percentage=100, step_remaining=0, remaining=0)
        return replace(d, step_remaining=None, remaining=None)
