"""What a report shows, read from what the API server and the job's claim hold: the job's status
and Events, its pods (and through their Events, the pods of earlier attempts, gone since), and
dglrun's logs (each line with its time: ``kubectl logs --timestamps``, or the stamped copy
kept on the claim). Pure functions: :func:`read` takes the objects, :class:`Readings` is what
the page (:mod:`dgl_operator.report.page`) draws.

Times are seconds since the job was created.

A log line is anyone's text (the user's processes print into dglrun's log): one longer than
:data:`MAX_LINE`, or whose figures cannot be read (``peak / / MiB``, a number of more than
:data:`MAX_DIGITS` digits, ``1.2.3s``), is skipped, never a crash.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from podcontract import logline
from podcontract.progress import read as read_progress
from podcontract.quantity import parse_quantity

MiB = 1 << 20
MAX_LINE = 64 * 1024  # characters of a log line read; a longer one is skipped
MAX_DIGITS = 18  # of a figure in a log line (an int past 4300 digits is a ValueError)
# a trainer's line at the end of an epoch (0-based), with the epoch's own seconds if it says
EPOCH = re.compile(r"\bepoch (\d+)\b(?:.*?\btime ([\d.]+)s)?")
# the operator's Events drawn as marks on the timeline (a new attempt, a lost node, ...)
MARKS = (
    "DGLJobRestarting",
    "DGLJobRescaled",
    "DGLJobGrowing",
    "NodeLost",
    "OOMKilled",
    "DGLJobSuspended",
    "DGLJobResumed",
    "DGLJobAdmitted",
    "BelowMinReplicas",
    "MemoryPlanExceeded",
    "FileRefused",
    "ReportRefused",
    "Evicted",
    "Preempted",
)


@dataclass(frozen=True)
class Bar:
    row: str  # "job", or a pod and its attempt: "worker-0 #1 (node-2)"
    what: str  # "1/5 partition", "train epoch 2", "generate", "queued", ...
    start: float
    end: float


@dataclass(frozen=True)
class Mark:
    t: float
    what: str


@dataclass
class Series:
    pod: str  # "worker-0 #1"
    samples: list[tuple[float, float]] = field(default_factory=list)  # (t, MiB)


@dataclass(frozen=True)
class LogLine:
    t: float  # seconds since the epoch
    text: str


@dataclass
class DglrunLog:
    """One pod's dglrun log: ``launcher`` or ``partitioner``; ``attempt`` (from 1) is set by
    :func:`read` from the job's restart Events, by the log's first line's time."""

    pod: str
    lines: list[LogLine]
    attempt: int = 0


@dataclass
class PartitionProfile:
    """The ParMETIS modes' ranks: per step the largest peak of each rank (MiB) and what each
    sent the others (MiB, summed over rounds); the steps' seconds; the edge cut."""

    peak: dict[str, list[float]] = field(default_factory=dict)
    sent: dict[str, list[float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    cut: str = ""


@dataclass
class Readings:
    name: str
    namespace: str
    phase: str
    message: str
    progress: str
    created: float  # seconds since the epoch
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    memory: list[Series] = field(default_factory=list)
    plan: dict[str, dict[str, float]] = field(default_factory=dict)  # status.memory
    steps: list[tuple[str, int, float]] = field(default_factory=list)  # (step, attempt, seconds)
    profile: PartitionProfile = field(default_factory=PartitionProfile)
    moved: list[tuple[str, float]] = field(default_factory=list)  # (what, bytes)
    events: list[tuple[float, str, str, str, str]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what could not be read, and why
    ended: str = ""  # Succeeded or Failed (its condition), "" while it runs
    limit: float = 0.0  # MiB: the largest memory limit of the plan's or a pod's (0: none)


def figure(text: str) -> float:
    """A number of a log line: ``ValueError`` when it is not one, has more than
    :data:`MAX_DIGITS` digits or is not finite."""
    if len(text) > MAX_DIGITS + 1:  # (a point)
        raise ValueError(f"{text[:20]}... is too long a number")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def count(text: str) -> int:
    """A whole number of a log line (:func:`figure`'s bounds)."""
    if len(text) > MAX_DIGITS or not text.isascii():
        raise ValueError(f"{text[:20]} is not a count")
    return int(text)


_FRACTION = re.compile(r"[0-9]{1,9}")


def timestamp(text: str | None) -> float | None:
    """An RFC 3339 time (the API's, the kubelet's) as seconds since the epoch."""
    if not text or not isinstance(text, str) or len(text) > 64:
        return None
    try:
        whole, _, frac = text.rstrip("Z").partition(".")
        t = datetime.fromisoformat(whole + "+00:00").timestamp()
    except ValueError:
        return None
    return t + (float("0." + frac) if _FRACTION.fullmatch(frac) else 0.0)


def stamped_lines(raw: Iterable[str]) -> list[LogLine]:
    """``<RFC 3339> <text>`` lines (the kubelet's or the claim's copy); others are dropped,
    and those longer than :data:`MAX_LINE`."""
    out = []
    for line in raw:
        if len(line) > MAX_LINE:
            continue
        ts, _, text = line.partition(" ")
        t = timestamp(ts)
        if t is not None:
            out.append(LogLine(t, text))
    return out


# -- the job's steps, from dglrun's log ---------------------------------------------------------


def step_windows(log: DglrunLog) -> list[tuple[str, float, float]]:
    """(step, start, end) of each phase dglrun ran (seconds since the epoch); the train phase
    in epochs (``train epoch k``, then ``evaluate``: the last epoch's evaluation and the model
    saved)."""
    phases: list[tuple[str, float, float | None]] = []
    trainer = ""
    epochs: dict[int, list[tuple[float, int, float | None]]] = {}  # phase -> (t, epoch, own s)
    for line in log.lines:
        m = logline.PHASE.match(line.text)
        if m:
            name = f"{m.group(1)}/{m.group(2)} {m.group(3)}"
            if m.group(4) is not None:
                if phases and phases[-1][0] == name:
                    phases[-1] = (name, phases[-1][1], line.t)
            else:
                phases.append((name, line.t, None))
            continue
        lab = logline.LABELLED.match(line.text)
        if lab and phases and phases[-1][0].endswith("train"):
            label, text = lab.group(1), lab.group(2)
            e = EPOCH.search(text)
            if e and (not trainer or label == trainer):
                try:
                    own = figure(e.group(2)) if e.group(2) else None
                    epoch = count(e.group(1))
                except ValueError:
                    continue  # (a line it cannot read: skipped)
                trainer = label
                epochs.setdefault(len(phases) - 1, []).append((line.t, epoch, own))
    last_t = log.lines[-1].t if log.lines else 0.0
    out: list[tuple[str, float, float]] = []
    for n, (name, t0, t1) in enumerate(phases):
        end = t1 if t1 is not None else last_t
        mine = epochs.get(n, [])
        if not mine:
            out.append((name, t0, end))
            continue
        prev = t0
        for i, (t, epoch, own) in enumerate(mine):
            if i == len(mine) - 1 and t1 is not None:  # the last: its evaluation follows
                trained = t if own is None else min(t, prev + own)
                out.append((f"train epoch {epoch + 1}", prev, trained))
                out.append(("evaluate", trained, end))
            else:
                out.append((f"train epoch {epoch + 1}", prev, t))
            prev = t
        if t1 is None and end > prev:
            out.append((f"train epoch {mine[-1][1] + 2}", prev, end))
    return out


def step_seconds(log: DglrunLog) -> list[tuple[str, float]]:
    out = []
    for line in log.lines:
        m = logline.PHASE.match(line.text)
        if m and m.group(4) is not None:
            with contextlib.suppress(ValueError):  # (a line it cannot read: skipped)
                out.append((f"{m.group(1)}/{m.group(2)} {m.group(3)}", figure(m.group(4))))
    return out


def profile(logs: list[DglrunLog]) -> PartitionProfile:
    prof = PartitionProfile()
    for log in logs:
        for line in log.lines:
            text = line.text
            m = logline.DISTPART_STEP.search(text)
            if m:
                step = m.group(1)
                try:
                    peak = [figure(x) for x in m.group(2).split(" / ")]
                    sent = [figure(x) for x in m.group(3).split(" / ")]
                except ValueError:
                    continue  # (``peak / / MiB``: a line it cannot read, skipped)
                if step in prof.peak and len(prof.peak[step]) == len(peak):
                    peak = [max(a, b) for a, b in zip(prof.peak[step], peak, strict=True)]
                    sent = [a + b for a, b in zip(prof.sent[step], sent, strict=True)]
                prof.peak[step], prof.sent[step] = peak, sent
                continue
            s = logline.RANK_STEPS.search(text)
            if s:
                for item in s.group(1).split(", "):
                    name, _, secs = item.rpartition(" ")
                    with contextlib.suppress(ValueError):
                        prof.seconds[name] = figure(secs.rstrip("s"))
                continue
            c = logline.EDGE_CUT.search(text)
            if c:
                with contextlib.suppress(ValueError):  # (a 5000-digit count: skipped)
                    figure(c.group(1))  # (as printed, once it reads as a number)
                    prof.cut = f"{c.group(1)}% of {count(c.group(2)):,} edges"
    return prof


def moved(logs: list[DglrunLog], prof: PartitionProfile) -> list[tuple[str, float]]:
    """Bytes moved: each worker's pull of its partition (the last figure its pull said), and
    what the ranks sent each other per step."""
    out: list[tuple[str, float]] = []
    for log in logs:
        pulled: dict[int, int] = {}
        for line in log.lines:
            lab = logline.LABELLED.match(line.text)
            if lab and lab.group(1).endswith("/pull"):
                p = logline.PULL.match(lab.group(2))
                if p:
                    with contextlib.suppress(ValueError):  # (a line it cannot read: skipped)
                        pulled[count(p.group(1))] = count(p.group(2))
        for part, done in sorted(pulled.items()):
            out.append((f"attempt {log.attempt}: partition {part} pulled by its worker", done))
    for step, sent in prof.sent.items():
        out.append((f"ranks' {step}: sent to the other ranks", sum(sent) * MiB))
    return out


def memory(logs: list[DglrunLog], created: float, job: str = "") -> list[Series]:
    """Each pod's memory samples (``[<pod>/...] memory sample: N MiB``), one series per
    pod and attempt (the attempt of the log that holds them), named as the timeline's rows
    (``worker-0 #2``: the pod's name without the job's)."""
    series: dict[str, Series] = {}
    for log in logs:
        for line in log.lines:
            lab = logline.LABELLED.match(line.text)
            mib = logline.memory_mib(lab.group(2)) if lab else None
            if lab is None or mib is None or not math.isfinite(mib) or mib >= 10**MAX_DIGITS:
                continue
            pod = _short(job, lab.group(1).split("/")[0])
            key = f"{pod} #{log.attempt}"
            s = series.setdefault(key, Series(key))
            t = line.t - created
            if s.samples and abs(s.samples[-1][0] - t) < 1.0:  # (two processes of one pod)
                s.samples[-1] = (s.samples[-1][0], max(s.samples[-1][1], mib))
            else:
                s.samples.append((t, mib))
    return sorted(series.values(), key=lambda s: s.pod)


# -- the pods, live and gone ------------------------------------------------------------------


@dataclass
class PodRecord:
    name: str  # the replica: "worker-0", "launcher"
    uid: str
    node: str
    first: float
    last: float
    containers: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # name -> run
    main: str = ""
    init: list[str] = field(default_factory=list)
    live: bool = True  # it exists (else: known from its Events)


REPLICA = re.compile(r"(launcher|partitioner|worker-\d+)")


def replica(job: str, pod: str) -> str | None:
    """The replica a pod of ``job`` is (``worker-0``, ``launcher``, ``partitioner``); None for
    a pod of another job (``<job>-2-worker-0``) or none of its replicas."""
    rest = pod[len(job) + 1 :] if pod.startswith(job + "-") else ""
    return rest if REPLICA.fullmatch(rest) else None


def _short(job: str, pod: str) -> str:
    return replica(job, pod) or pod


def pods(job: str, live: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[PodRecord]:
    """Every pod of the job: those that exist (their containers' states) and those gone whose
    Events remain (Scheduled: the node; Started: a container; Killing: the end)."""
    out: dict[str, PodRecord] = {}
    for pod in live:
        meta, spec, st = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        t0 = timestamp(meta.get("creationTimestamp")) or 0.0
        node = str(spec.get("nodeName") or "")
        rec = PodRecord(_short(job, meta["name"]), meta.get("uid", ""), node, t0, t0)
        rec.main = str(((spec.get("containers") or [{}])[0]).get("name") or "")
        rec.init = [str(c.get("name")) for c in spec.get("initContainers") or []]
        for kind in ("initContainerStatuses", "containerStatuses"):
            for cs in st.get(kind) or []:
                state = cs.get("state") or {}
                run = state.get("running") or state.get("terminated") or {}
                started = timestamp(run.get("startedAt"))
                if started is None:
                    continue
                finished = timestamp((state.get("terminated") or {}).get("finishedAt"))
                rec.containers[cs["name"]] = (started, finished)
                rec.last = max(rec.last, finished or started)
        out[rec.uid] = rec
    for e in events:
        obj = e.get("involvedObject") or {}
        if obj.get("kind") != "Pod" or replica(job, str(obj.get("name") or "")) is None:
            continue
        uid = str(obj.get("uid") or "")
        t = event_time(e)
        if not uid or t is None:
            continue
        if uid not in out:
            out[uid] = PodRecord(_short(job, str(obj["name"])), uid, "", t, t, live=False)
        rec = out[uid]
        rec.first, rec.last = min(rec.first, t), max(rec.last, t)
        if rec.live:
            continue
        reason, path = e.get("reason", ""), str(obj.get("fieldPath") or "")
        m = re.match(r"spec\.(initContainers|containers)\{(.+)\}", path)
        if reason == "Scheduled":
            n = re.search(r" to (\S+)$", str(e.get("message") or ""))
            rec.node = n.group(1) if n else rec.node
        elif reason == "Started" and m:
            rec.containers.setdefault(m.group(2), (t, None))
            if m.group(1) == "containers":
                rec.main = rec.main or m.group(2)
            elif m.group(2) not in rec.init:
                rec.init.append(m.group(2))
        elif reason == "Killing" and m:
            start, _ = rec.containers.get(m.group(2), (t, None))
            rec.containers[m.group(2)] = (start, t)
    for rec in out.values():  # a gone pod's init containers ended when the next one started
        if rec.live:
            continue
        order = [*rec.init, rec.main]
        for a, b in itertools.pairwise(order):
            if a in rec.containers and rec.containers[a][1] is None and b in rec.containers:
                rec.containers[a] = (rec.containers[a][0], rec.containers[b][0])
    return sorted(out.values(), key=lambda r: (r.first, r.name))


def event_time(e: dict[str, Any]) -> float | None:
    return timestamp(
        e.get("lastTimestamp")
        or e.get("eventTime")
        or e.get("firstTimestamp")
        or (e.get("metadata") or {}).get("creationTimestamp")
    )


# -- putting it together ----------------------------------------------------------------------


NEW_ATTEMPT = ("DGLJobRestarting", "DGLJobRescaled", "DGLJobGrowing")


def attempts_by_time(job: dict[str, Any], job_events: list[dict[str, Any]]) -> Any:
    """``attempt(t)``: the job's attempt (from 1) at the time ``t``: one more after each
    restart and rescale Event; the ones whose Events have expired (an hour, by default) are
    counted from the status (restartCount, elastic.rescales) as before the first known."""
    status = job.get("status") or {}
    total = int(status.get("restartCount") or 0) + int(
        (status.get("elastic") or {}).get("rescales") or 0
    )
    starts = sorted(
        t for e in job_events if e.get("reason") in NEW_ATTEMPT and (t := event_time(e))
    )
    base = max(total - len(starts), 0)

    def attempt(t: float) -> int:
        return 1 + base + sum(1 for s in starts if s <= t)

    return attempt


def memory_limit(pod: dict[str, Any]) -> float:
    """The pod's main container's memory limit in bytes (0: none)."""
    main = ((pod.get("spec") or {}).get("containers") or [{}])[0]
    text = str(((main.get("resources") or {}).get("limits") or {}).get("memory") or "")
    try:
        return float(parse_quantity(text)) if text else 0.0
    except ValueError:
        return 0.0


def merged(bars: list[Bar]) -> list[Bar]:
    """One bar per row and step: a step two logs of one attempt both report (the partitioner's
    and the launcher's) spans both."""
    out: dict[tuple[str, str], Bar] = {}
    for b in bars:
        had = out.get((b.row, b.what))
        out[(b.row, b.what)] = (
            b if had is None else Bar(b.row, b.what, min(had.start, b.start), max(had.end, b.end))
        )
    return list(out.values())


def read(
    job: dict[str, Any],
    live_pods: list[dict[str, Any]],
    events: list[dict[str, Any]],
    logs: list[DglrunLog],
    now: float,
) -> Readings:
    """The report's readings of ``job`` (its object), its pods, the Events of it and of its
    pods, and dglrun's logs."""
    meta, status = job["metadata"], job.get("status") or {}
    name = meta["name"]
    created = timestamp(meta.get("creationTimestamp")) or now
    cond = (status.get("conditions") or [{}])[-1]
    progress = read_progress(status)
    r = Readings(
        name=name,
        namespace=meta.get("namespace", ""),
        phase=str(status.get("phase") or "Pending"),
        message=str(cond.get("message") or ""),
        progress=progress.text,
        created=created,
        plan={k: dict(v) for k, v in (status.get("memory") or {}).items()},
        metrics=dict(progress.detail.metrics) if progress.detail else {},
        notes=[progress.problem] if progress.problem else [],
    )
    r.ended = next(
        (
            str(c["type"])
            for c in status.get("conditions") or []
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        ),
        "",
    )
    end_of_job = max(
        [now if not r.ended else created]
        + [event_time(e) or created for e in events]
        + [ln.t for log in logs for ln in log.lines[-1:]]
    )
    job_events = [e for e in events if (e.get("involvedObject") or {}).get("kind") != "Pod"]
    attempt = attempts_by_time(job, job_events)
    logs = sorted((g for g in logs if g.lines), key=lambda g: g.lines[0].t)
    for g in logs:
        g.attempt = attempt(g.lines[0].t)

    windows: list[tuple[str, float, float]] = []
    for log in logs:  # (the partitioner's log and the launcher's, of each attempt)
        mine = step_windows(log)
        windows += mine
        row = f"job, attempt {log.attempt}"
        r.bars += [Bar(row, w, t0 - created, t1 - created) for w, t0, t1 in mine]
        r.steps += [(s, log.attempt, secs) for s, secs in step_seconds(log)]

    first_pod = min(
        (event_time(e) or end_of_job for e in job_events if e.get("reason") == "SuccessfulCreate"),
        default=None,
    )
    if first_pod is not None and first_pod - created >= 1.0:
        r.bars.append(Bar("job", "queued", 0.0, first_pod - created))
    suspended = None
    for e in job_events:
        t, reason = (event_time(e) or created) - created, str(e.get("reason") or "")
        if reason in MARKS:
            r.marks.append(Mark(t, f"{reason}: {e.get('message', '')}"))
        if reason == "DGLJobSuspended":
            suspended = t
        elif reason == "DGLJobResumed" and suspended is not None:
            r.bars.append(Bar("job", "suspended", suspended, t))
            suspended = None
    if suspended is not None:
        r.bars.append(Bar("job", "suspended", suspended, end_of_job - created))

    for rec in pods(name, live_pods, events):
        n = attempt(rec.first)
        last = end_of_job if rec.live else rec.last
        row = f"{rec.name} #{n} ({rec.node or '?'})"
        for c in rec.init:
            if c in rec.containers:
                t0, t1 = rec.containers[c]
                r.bars.append(Bar(row, c, t0 - created, (t1 or end_of_job) - created))
        if rec.main not in rec.containers:
            if not rec.containers:
                r.bars.append(Bar(row, "pending", rec.first - created, rec.last - created))
            continue
        m0, m1 = rec.containers[rec.main]
        m1 = m1 or last
        inside = False
        for what, w0, w1 in windows:
            lo, hi = max(m0, w0), min(m1, w1)
            if hi > lo:
                inside = True
                r.bars.append(Bar(row, what, lo - created, hi - created))
        if not inside:
            r.bars.append(Bar(row, "running", m0 - created, m1 - created))

    r.bars = merged(r.bars)
    r.limit = max(
        [float(v.get("limitMiB") or 0) for v in r.plan.values()]
        + [memory_limit(p) / MiB for p in live_pods]
        + [0.0]  # (neither a plan nor a pod yet)
    )
    r.memory = memory(logs, created, name)
    r.profile = profile(logs)
    r.moved = moved(logs, r.profile)
    for e in events:
        obj = e.get("involvedObject") or {}
        r.events.append(
            (
                (event_time(e) or created) - created,
                str(e.get("type") or ""),
                str(e.get("reason") or ""),
                f"{obj.get('kind', '')}/{obj.get('name', '')}",
                str(e.get("message") or ""),
            )
        )
    r.events.sort()
    return r
