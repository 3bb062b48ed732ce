"""dglrun's progress, reported to the operator: the text ``progress`` (the PROGRESS column, for
display) and, beside it, ``progressDetail`` (:mod:`launcher.report.eta`: the values the
operator and the client read), with the other fields of its report (podcontract/report.py).

The text is short: ``3/5 dispatch``, ``3/5 dispatch: 210/420 MB``, ``5/5 train: epoch 2/10``,
``done``, ``failed in 5/5 train``. Trainer output lines that contain ``epoch <n>`` (0-based, as
DGL's examples print them, e.g. ``Epoch 00003 | Loss ...``) advance the epoch count; the highest
seen wins, capped at ``--num-epochs``. The workers' pull progress lines (``<worker>/pull``)
add up to the bytes delivered so far.

In a pod, :class:`ReportProgress` writes its report, whole, to its key of the job's report
ConfigMap (``kubectl patch configmap <job>-report --type=merge``; the launcher's and the
partitioner's Roles may patch that one object, and never the DGLJob): the operator checks it
and copies it into the DGLJob's status. At most once per ``interval`` seconds, from a
background thread, so training never waits for the API server. Reporting is best effort: a
refused or failing patch is said once on the console and never fails the job. Without a job
name or a kubectl (Skip mode, ``--transport local``) :class:`NoProgress` does nothing.

:meth:`Progress.event` asks for a Kubernetes Event on the DGLJob, for what only dglrun knows:
partitions reused from the job's storage, a checkpoint resumed from or skipped. It goes in the
report too (the operator records it once; the pods may create no Events). The interface
(``Progress``, ``NoProgress``) is launcher.console's, whose lines the progress follows.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from launcher.console import NoProgress, Progress
from launcher.delivery.pull import parse_progress
from launcher.plans.time import Estimate
from launcher.report.eta import Eta
from podcontract import (
    PROGRESS_DONE,
    STATUS_ELASTIC,
    STATUS_GROW_TO,
    STATUS_MEMBERS,
    STATUS_PROGRESS,
    STATUS_PROGRESS_DETAIL,
)
from podcontract import report as rep
from podcontract.progress import ProgressDetail

FAILED = "failed"
# Stopped from outside (SIGTERM: the operator deletes the pod to suspend or restart the job,
# and clears the progress itself): publish nothing more, not even what is pending.
ABANDONED = "abandoned"
PATCH_TIMEOUT = 10.0  # seconds per `kubectl patch`
EVENT_TYPES = rep.EVENT_TYPES
# seconds between patches that only move the estimates (the ETA counts down between events)
REFRESH = 15.0
EPOCH = re.compile(r"\bepoch\s+(\d+)\b", re.IGNORECASE)
MAX_FAILURES = 3  # consecutive refused patches before giving up
# The API server answered no: the same patch would be refused again (counted to MAX_FAILURES).
# Any other failure (unreachable, timed out, 5xx: a control-plane restart) is retried, the
# latest report kept, until it goes through: the status catches up once the server is back.
REFUSED = re.compile(
    r"Error from server \((Forbidden|NotFound|Invalid|BadRequest|Unauthorized|"
    r"UnsupportedMediaType|RequestEntityTooLarge)\)"
)
RETRY_DELAYS = (1.0, 2.0, 4.0)  # then every last one, until the patch goes through


def is_trainer(label: str) -> bool:
    """Labels of trainer output: ``<worker>/trainer-<t>`` (workers) or ``train`` (Skip)."""
    return label == "train" or label.rsplit("/", 1)[-1].startswith("trainer-")


class Tracker:
    """The current progress text, from phases and trainer output, and the detail beside it
    (:class:`~launcher.report.eta.Eta`; no I/O)."""

    def __init__(self, num_epochs: int, now: Callable[[], float] = time.monotonic) -> None:
        self.num_epochs = num_epochs
        self.text = ""
        self.eta = Eta(num_epochs, now)
        self.detail_changed = False  # metrics or a pace learnt since the last detail taken
        self._phase = ""
        self._epochs = 0
        self._bytes: dict[int, tuple[int, int]] = {}  # part -> (done, total)

    @property
    def current_phase(self) -> str:
        return self._phase

    def phase(self, k: int, total: int, name: str) -> str:
        self._phase = f"{k}/{total} {name}"
        self._epochs = 0
        self._bytes = {}
        self.text = self._phase
        self.eta.step(k, total, name)
        return self.text

    def output(self, label: str, text: str) -> str | None:
        """The new text if this line advanced the epoch count or the bytes delivered."""
        if self._phase and label.endswith("/pull"):
            return self._pulled(text)
        if self.eta.partition_line(text):
            self.detail_changed = True
            return None
        if not self._phase or not is_trainer(label):
            return None
        m = EPOCH.search(text)
        if not m:
            self.eta.trainer_line()
            return None
        done = min(int(m.group(1)) + 1, self.num_epochs)
        self.detail_changed |= self.eta.epoch(max(done, self._epochs), label, text)
        if done <= self._epochs:
            return None
        self._epochs = done
        self.text = f"{self._phase}: epoch {done}/{self.num_epochs}"
        return self.text

    def _pulled(self, text: str) -> str | None:
        got = parse_progress(text)
        if got is None:
            return None
        part, done, total = got
        self._bytes[part] = (done, total)
        done_all = sum(d for d, _ in self._bytes.values())
        total_all = sum(t for _, t in self._bytes.values())
        self.eta.pulled(done_all, total_all)
        self.text = f"{self._phase}: {done_all / 1e6:.0f}/{total_all / 1e6:.0f} MB"
        return self.text

    def detail(self, outcome: str | None = None) -> ProgressDetail:
        """The detail now; with an outcome, the last one (``done``: 100%, nothing left)."""
        self.detail_changed = False
        if outcome is None:
            return self.eta.detail()
        return self.eta.finished(outcome == PROGRESS_DONE)


Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=PATCH_TIMEOUT)


class ReportProgress:
    """Reports :class:`Tracker`'s text, the detail and the recorded fields to the DGLJob
    ``job``'s report ConfigMap, under ``reporter`` (podcontract/report.py), as ``attempt``'s."""

    def __init__(
        self,
        kubectl: str,
        job: str,
        num_epochs: int,
        warn: Callable[[str], None],
        *,
        reporter: str = rep.LAUNCHER,
        attempt: int = 0,
        interval: float = 2.0,
        refresh: float = REFRESH,
        run: Runner = _run,
    ) -> None:
        self.kubectl = kubectl
        self.job = job
        self.reporter = reporter
        self.attempt = attempt
        self.tracker = Tracker(num_epochs)
        self._warn = warn
        self._interval = interval
        self._refresh = refresh
        self._run = run
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: str | None = None
        self._failures = 0
        self._unreachable = 0  # consecutive patches that did not reach the API server
        self._fields: dict[str, object] = {}
        self._fields_sent = True  # every recorded field and event went out with a patch
        self._events: list[dict[str, object]] = []  # the last rep.MAX_EVENTS asked for
        self._seq = 0
        self._last_text = ""
        self._last_detail: dict[str, object] | None = None  # as last published
        self._final: ProgressDetail | None = None  # the outcome's, once finished
        self._closed = False
        self._given_up = False  # finish() waited its time: the sender stops, retries too
        self.published: list[str] = []
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._thread.start()

    def argv(
        self,
        text: str,
        fields: dict[str, object] | None = None,
        events: list[dict[str, object]] | None = None,
    ) -> list[str]:
        status: dict[str, object] = {STATUS_PROGRESS: text, **(fields or {})}
        doc = rep.document(self.attempt, status, events or [])
        patch = json.dumps({"data": {self.reporter: doc}}, separators=(",", ":"))
        name = rep.report_name(self.job)
        return [self.kubectl, "patch", "configmap", name, "--type=merge", "-p", patch]

    def _elastic_field(self, name: str) -> str:
        """``status.elastic.<name>`` as kubectl's jsonpath prints it ('' when absent or
        unreadable: best effort, as the progress is)."""
        field = f"{{.status.{STATUS_ELASTIC}.{name}}}"
        argv = [self.kubectl, "get", "dgljob", self.job, "--subresource=status", "-o",
                f"jsonpath={field}"]  # fmt: skip
        try:
            done = self._run(argv)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    def grow_to(self) -> int | None:
        """An elastic job's grow request (``status.elastic.growTo``), or None."""
        text = self._elastic_field(STATUS_GROW_TO)
        return int(text) if text.isdigit() else None

    def members(self) -> list[str] | None:
        """An elastic attempt's workers (``status.elastic.members``) once chosen, or None."""
        text = self._elastic_field(STATUS_MEMBERS)
        try:
            names = json.loads(text) if text else None
        except ValueError:
            return None
        return [str(n) for n in names] if isinstance(names, list) and names else None

    def _offer(self, text: str | None) -> None:
        # (under the lock: output arrives from one thread per remote process)
        if text is not None:
            self._pending = self._last_text = text
            self._wake.notify()

    def phase(self, k: int, total: int, name: str) -> None:
        with self._lock:
            self._offer(self.tracker.phase(k, total, name))

    def output(self, label: str, text: str) -> None:
        with self._lock:
            new = self.tracker.output(label, text)
            if new is None and self.tracker.detail_changed and self._last_text:
                new = self._last_text  # (new metrics or a pace: the same text, a new detail)
            self._offer(new)

    def expect(self, plan: Estimate) -> None:
        with self._lock:
            self.tracker.eta.expect(plan)

    def record(self, field: str, value: object) -> None:
        with self._lock:
            self._fields[field] = value
            self._fields_sent = False

    def event(self, type_: str, reason: str, message: str) -> None:
        """Ask for an Event on the job: it goes out with the next report."""
        with self._lock:
            self._seq += 1
            event = {"seq": self._seq, "type": type_, "reason": reason,
                     "message": message[: rep.MAX_MESSAGE]}  # fmt: skip
            self._events = [*self._events, event][-rep.MAX_EVENTS :]
            self._fields_sent = False
            if self._last_text and self._pending is None:
                self._pending = self._last_text
                self._wake.notify()

    def _publish(
        self, text: str, fields: dict[str, object], events: list[dict[str, object]]
    ) -> bool:
        """Whether to try again (the API server was not reached)."""
        if self._failures >= MAX_FAILURES:
            return False
        unreachable = False
        try:
            out = self._run(self.argv(text, fields, events))
            ok, why = out.returncode == 0, out.stderr.strip()[-300:]
            unreachable = not ok and not REFUSED.search(why)
        except subprocess.TimeoutExpired as e:
            ok, why, unreachable = False, f"kubectl patch timed out after {e.timeout:.0f}s", True
        except (OSError, subprocess.SubprocessError) as e:
            ok, why = False, str(e)
        if ok:
            if self._unreachable:
                self._warn(f"  the API server answers again: reporting to DGLJob {self.job}")
            self._failures = self._unreachable = 0
            self.published.append(text)
            return False
        if unreachable:
            self._unreachable += 1
            if self._unreachable == 1:
                self._warn(
                    f"  warning: cannot reach the API server to report to DGLJob {self.job} "
                    f"({why}); training goes on, the report is retried"
                )
            return True
        self._failures += 1
        if self._failures == 1:
            self._warn(f"  warning: cannot report progress to DGLJob {self.job}: {why}")
        if self._failures == MAX_FAILURES:
            self._warn("  warning: progress reporting stopped (the job itself is unaffected)")
        return False

    def _detail(self) -> dict[str, object]:
        # (under the lock)
        detail = self._final if self._final is not None else self.tracker.detail()
        return detail.as_status()

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._pending is None and not self._closed:
                    self._wake.wait(self._refresh)
                # (no news: publish again only if the estimates moved)
                idle = self._pending is None and not self._closed and self._last_text
                if idle and self._detail() != self._last_detail:
                    self._pending = self._last_text
                if self._pending is None:
                    if self._closed:
                        return
                    continue
                text, self._pending = self._pending, None
                fields = dict(self._fields)
                fields[STATUS_PROGRESS_DETAIL] = self._last_detail = self._detail()
                events = list(self._events)
                self._fields_sent = True
            pause = self._interval  # at most one patch per interval
            retry = self._publish(text, fields, events)
            if retry:
                with self._lock:  # (the latest text wins: it goes with the latest fields)
                    if self._given_up:
                        return
                    if self._pending is None:
                        self._pending = text
                    self._fields_sent = False
                pause = max(pause, RETRY_DELAYS[min(self._unreachable, len(RETRY_DELAYS)) - 1])
            deadline = time.monotonic() + pause
            with self._lock:  # (a retry waits its pause even once closed)
                while (retry or not self._closed) and (left := deadline - time.monotonic()) > 0:
                    if self._given_up:
                        return
                    self._wake.wait(left)

    def finish(self, outcome: str | None) -> None:
        """Publish the outcome (``done``; ``failed`` becomes ``failed in <phase>``), or with
        None what is pending, or with ``abandoned`` nothing; then wait for the sender to stop
        (at most about one patch: dglrun's exit never waits long for the API server)."""
        with self._lock:
            if outcome in (FAILED, PROGRESS_DONE):
                self._final = self.tracker.detail(outcome)
            if outcome == FAILED and self.tracker.current_phase:
                outcome = f"failed in {self.tracker.current_phase}"
            if outcome == ABANDONED:
                self._pending = None
            elif outcome is not None:
                self._pending = outcome
            elif self._pending is None and not self._fields_sent:
                self._pending = self._last_text  # fields recorded since the last patch

            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=PATCH_TIMEOUT + 5)
        with self._lock:
            self._given_up = True
            self._wake.notify()


@dataclass(frozen=True)
class ProgressTarget:
    """The DGLJob a dglrun in a pod reports to, and the attempt its pod belongs to (from the
    operator's env; no name outside one)."""

    name: str = ""
    uid: str = ""
    namespace: str = ""
    attempt: int = 0


def for_job(
    job: ProgressTarget,
    kubectl: str,
    num_epochs: int,
    warn: Callable[[str], None],
    reporter: str = rep.LAUNCHER,
) -> Progress:
    """The job's progress reporter; :class:`NoProgress` without a job or a kubectl."""
    if not job.name or not Path(kubectl).is_file():
        return NoProgress()
    return ReportProgress(
        kubectl, job.name, num_epochs, warn, reporter=reporter, attempt=job.attempt
    )
