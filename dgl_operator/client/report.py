"""``dglctl report``: collect what the API server and the job's claim hold of one DGLJob and
write :mod:`dgl_operator.report`'s page.

* the job, its pods (``dgl.qihoo.net/job-name``), and the Events of both (a pod gone since is
  known by its Events while they last: an hour by default);
* dglrun's logs with their times: the launcher's and the partitioner's pods' (``kubectl logs
  --timestamps``), and for a job with ``spec.storage`` every attempt's stamped copy on the claim
  (through a reader pod, :mod:`dgl_operator.client.results`; ``claim=False``: not).

What it reads is bounded: a pod's log to :data:`LOG_BYTES` (the request's ``limitBytes``, and
no more read of the answer), a log kept on the claim to as many, the namespace's Events to
:data:`EVENTS_LIMIT` (the list's ``limit``); a cut is a note on the page. A line too long or
that cannot be read is skipped (:mod:`dgl_operator.report.readings`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dgl_operator.client import results as results_mod
from dgl_operator.client.errors import DGLJobError, NoResults, ResultsCopyFailed
from dgl_operator.client.logs import main_container, started
from dgl_operator.client.status import ended
from dgl_operator.report.page import page
from dgl_operator.report.readings import (
    DglrunLog,
    Readings,
    event_time,
    read,
    replica,
    stamped_lines,
    timestamp,
)
from dgljob.names import JOB_NAME_LABEL
from kubeclient import EVENTS, PODS, ApiError, NotFound, RestClient, TransportError

ROLES = ("partitioner", "launcher")  # the pods whose log is dglrun's
LOG_BYTES = 64 * 1024 * 1024  # of one log read (a pod's, or one kept on the claim): its start
EVENTS_LIMIT = 5000  # the namespace's Events read


def _cut(data: bytes, what: str, notes: list[str]) -> list[str]:
    """``data`` (read up to :data:`LOG_BYTES` + 1) as lines: what is past the bound dropped,
    with a note naming ``what``."""
    if len(data) > LOG_BYTES:
        data = data[:LOG_BYTES]
        notes.append(f"{what} is longer than {LOG_BYTES} bytes: only its first ones were read")
    return data.decode(errors="replace").splitlines()


def pod_log(
    api: RestClient, namespace: str, pod: dict[str, Any], notes: list[str] | None = None
) -> list[str]:
    """A pod's main container's log, each line with the kubelet's time ([] if none yet; an
    :class:`ApiError` or :class:`TransportError` when it cannot be read): at most
    :data:`LOG_BYTES` asked for and read (a longer log is cut, said in ``notes``)."""
    container = main_container(pod)
    if not started(pod, container):
        return []
    # (one byte more than the bound: a log that was cut is seen to be)
    query = {"container": container, "timestamps": True, "limitBytes": LOG_BYTES + 1}
    name = pod["metadata"]["name"]
    with contextlib.closing(api.stream(PODS, namespace, name, "log", query=query)) as s:
        data = s.read(LOG_BYTES + 1)
    return _cut(data, f"the log of pod {namespace}/{name}", [] if notes is None else notes)


def gone(api: RestClient, namespace: str, name: str) -> bool:
    """The pod was deleted (since it was listed)."""
    try:
        api.get(PODS, namespace, name)
    except NotFound:
        return True
    return False


def claim_logs(
    api: RestClient, job: dict[str, Any], image: str | None, notes: list[str] | None = None
) -> list[DglrunLog]:
    """Every attempt's log kept on the job's claim (none without ``spec.storage``), each read
    to at most :data:`LOG_BYTES` (a longer one is cut, said in ``notes``)."""
    notes = [] if notes is None else notes
    try:
        src = results_mod.source_of(job)
    except NoResults:
        return []
    if image:
        src.image = image
    out: list[DglrunLog] = []
    with tempfile.TemporaryDirectory(prefix="dglctl-report-") as tmp:
        got = results_mod.copy(api, src, Path(tmp) / "run")
        files = sorted((got.dest / "logs").rglob("*.log"))
        for f in files:
            role = f.name.split("-")[0]
            if role not in ROLES:
                continue
            with f.open("rb") as fh:
                data = fh.read(LOG_BYTES + 1)
            lines = stamped_lines(_cut(data, f"the log {f.name} kept on the claim", notes))
            out.append(DglrunLog(role, lines))
    return out


def ours(job: dict[str, Any], event: dict[str, Any]) -> bool:
    """An Event of this job (its uid), or of one of its pods (by name, :func:`replica`, and not
    before the job was made: an earlier job of the same name had pods of the same names)."""
    meta, obj = job["metadata"], event.get("involvedObject") or {}
    name = str(obj.get("name") or "")
    if obj.get("kind") == "Pod":
        made = timestamp(meta.get("creationTimestamp")) or 0.0
        return replica(meta["name"], name) is not None and (event_time(event) or 0.0) >= made - 1
    return name == meta["name"] and obj.get("uid") in (meta.get("uid"), None, "")


def collect(
    api: RestClient,
    namespace: str,
    job: dict[str, Any],
    options: ReportOptions,
    kept: list[DglrunLog] | None = None,
) -> tuple[Readings, list[DglrunLog]]:
    """The readings of ``job`` now, and the claim's logs read (``kept``: those read before,
    not read again)."""
    name = job["metadata"]["name"]
    pods = api.list(PODS, namespace, label_selector=f"{JOB_NAME_LABEL}={name}").get("items") or []
    listed = api.list(EVENTS, namespace, limit=EVENTS_LIMIT)
    events = [e for e in listed.get("items") or [] if ours(job, e)]
    notes: list[str] = []
    if (listed.get("metadata") or {}).get("continue"):
        notes.append(f"namespace {namespace} has more than {EVENTS_LIMIT} Events: not all read")
    stored = kept
    if stored is None:
        stored = claim_logs(api, job, options.image, notes) if options.claim else []
    logs = list(stored)
    for role in ROLES:
        pod = next((p for p in pods if p["metadata"]["name"] == f"{name}-{role}"), None)
        if pod is None:
            continue
        try:
            lines = stamped_lines(pod_log(api, namespace, pod, notes))
        except (ApiError, TransportError) as e:
            if not (isinstance(e, NotFound) and gone(api, namespace, f"{name}-{role}")):
                notes.append(f"the log of pod {namespace}/{name}-{role} could not be read: {e}")
            continue
        if not lines:
            continue
        # the live pod's attempt is on the claim too when the claim was read after it started
        same = [g for g in logs if g.pod == role and g.lines and abs(g.lines[0].t - lines[0].t) < 5]
        if same:  # (the pod's own log is the longer while it runs: the claim's was read before)
            if len(lines) > len(same[0].lines):
                logs[logs.index(same[0])] = DglrunLog(role, lines)
            continue
        logs.append(DglrunLog(role, lines))
    readings = read(job, pods, events, logs, time.time())
    readings.notes += notes
    return readings, stored


def write(path: Path, html: str) -> None:
    """Replace ``path`` whole (a browser reloading it never reads half a page)."""
    path = path.expanduser()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(html)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise DGLJobError(f"cannot write the report to {path}: {e.strerror or e}") from e


@dataclass(frozen=True)
class ReportOptions:
    """How ``dglctl report`` writes its page."""

    watch: bool = False  # rewrite it every ``interval`` seconds until the job has ended
    interval: float = 10.0
    claim: bool = True  # read the logs the job keeps on its claim (through a reader pod)
    image: str | None = None  # the reader pod's image (default: the launcher's)


def report(
    api: RestClient,
    namespace: str,
    get_job: Callable[[], dict[str, Any]],
    dest: Path,
    options: ReportOptions,
    on_write: Callable[[Readings], None] | None = None,
) -> Readings:
    """Write the report of the job ``get_job()`` returns to ``dest``; with ``options.watch``
    again every ``options.interval`` seconds until the job has ended (the page reloads itself
    meanwhile), the claim's logs read at the start and once more at the end."""
    kept: list[DglrunLog] | None = None
    while True:
        job = get_job()
        done = ended(job) is not None
        try:
            readings, stored = collect(api, namespace, job, options, None if done else kept)
        except ResultsCopyFailed as e:
            raise ResultsCopyFailed(
                f"{e} (dglctl report --no-claim reads the pods' logs only)"
            ) from e
        kept = stored
        live = options.watch and not done
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        refresh = max(1, round(options.interval)) if live else 0
        write(dest, page(readings, refresh=refresh, written=stamp))
        if on_write is not None:
            on_write(readings)
        if not live:
            return readings
        time.sleep(options.interval)
