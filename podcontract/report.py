"""dglrun's report to the operator: what only dglrun knows, written where the job's pods may
write, and copied into the DGLJob's status by the operator alone.

No pod of a job may write its DGLJob (the job's code runs in those pods: a status it could
write would steer the operator, e.g. finish the job and free its Kueue quota while its pods go
on). dglrun writes instead to the ConfigMap ``<job>-report`` (:func:`report_name`), made by
the operator for the job and owned by it, the one object the launcher's and the
partitioner's Roles may patch. Each reporter has its own key (:data:`REPORTERS`), whose value
is one JSON document, replaced whole at each report::

    {"attempt": 2,                                  # the pod's attempt (its env, ATTEMPT)
     "status": {"progress": "5/5 train: epoch 3/8", # the fields of DGLRUN_STATUS_FIELDS
                "progressDetail": {...}, "resume": {...}, ...},
     "events": [{"seq": 1, "type": "Normal", "reason": "Resuming", "message": "..."}]}

The operator reads it with :func:`read` (never raises): only the running attempt's documents
count; every field is checked (type, size, range: epochs done never past the epochs, a resume
point a file of the job's own run folder), and one that fails is left out and named in
``problems``, which the operator says in a condition and an Event. Phase, conditions, queue,
times, counts, members, ``growTo`` and secret names are never read from here. Standard library
only, like the rest of the pod contract.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podcontract import (
    STATUS_DELIVERY_BYTES,
    STATUS_DELIVERY_SECONDS,
    STATUS_MEMORY,
    STATUS_PARTITION_SECONDS,
    STATUS_PARTITIONS,
    STATUS_PROGRESS,
    STATUS_PROGRESS_DETAIL,
    STATUS_RESUME,
    STORAGE_RUNS,
)
from podcontract.jsontext import too_deep
from podcontract.progress import DetailError, checked

LAUNCHER = "launcher"
PARTITIONER = "partitioner"
REPORTERS = (PARTITIONER, LAUNCHER)  # in the order their fields are copied (the launcher wins)
ATTEMPT = "attempt"
STATUS = "status"
EVENTS = "events"
# bounds: one reporter's document, the text, an object field (memory, partitions), events
MAX_DOCUMENT = 64 * 1024
MAX_TEXT = 256
MAX_OBJECT = 16 * 1024
MAX_DEPTH = 8
MAX_EVENTS = 32
MAX_MESSAGE = 1024
EVENT_TYPES = ("Normal", "Warning")
_REASON = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}$")
_KEY = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
# the largest figures taken: ~115 days of seconds, 1 PB
MAX_SECONDS = 1e7
MAX_BYTES = 10**15


def report_name(job: str) -> str:
    """The job's report ConfigMap."""
    return f"{job}-report"


def document(attempt: int, status: Mapping[str, object], events: list[dict[str, object]]) -> str:
    """A reporter's document, as dglrun writes it."""
    doc = {ATTEMPT: attempt, STATUS: dict(status), EVENTS: events}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class ReportEvent:
    """An Event dglrun asks for on its job (the operator records it, once)."""

    reporter: str
    seq: int
    type: str
    reason: str
    message: str


@dataclass
class Reading:
    """The running attempt's report: the status fields that passed every check (the
    launcher's over the partitioner's), the events asked for, and what was refused."""

    status: dict[str, object] = field(default_factory=dict)
    events: list[ReportEvent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class ReportFieldRefused(ValueError):
    """A report field that fails its check (the message names it)."""


def _number(name: str, value: object, top: float, whole: bool = False) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReportFieldRefused(f"{name} is {_shown(value)}, not a number")
    if not math.isfinite(value) or not 0 <= value <= top:
        raise ReportFieldRefused(f"{name} is {_shown(value)}, outside 0..{top:g}")
    if whole:
        if not float(value).is_integer():
            raise ReportFieldRefused(f"{name} is {_shown(value)}, not a whole number")
        return int(value)
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _object(name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReportFieldRefused(f"{name} is {_shown(value)}, not an object")
    text = json.dumps(value)
    if too_deep(text, MAX_DEPTH):
        raise ReportFieldRefused(f"{name} is nested deeper than {MAX_DEPTH} levels")
    if len(text) > MAX_OBJECT:
        raise ReportFieldRefused(f"{name} is larger than {MAX_OBJECT} bytes")
    return value


def _text(name: str, value: object, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise ReportFieldRefused(f"{name} is {_shown(value)}, not a string")
    if len(value) > limit or not value.isprintable():
        raise ReportFieldRefused(f"{name} is not a printable string of at most {limit} characters")
    return value


def _resume(name: str, value: object, run_name: str) -> dict[str, Any]:
    raw = _object(name, value)
    epoch = _number(f"{name}.epoch", raw.get("epoch"), 10**6, whole=True)
    where = _text(f"{name}.checkpoint", raw.get("checkpoint"), 1024)
    folder = f"{STORAGE_RUNS}/{run_name}/"
    rest = where[len(folder) :].split("/") if where.startswith(folder) else []
    if not run_name or len(rest) < 2 or not all(_FILE.match(p) for p in rest):
        why = f"{name}.checkpoint {_shown(where)} is not a file of the job's run folder {folder}"
        raise ReportFieldRefused(why)
    return {"epoch": epoch, "checkpoint": where}


def _partitions(name: str, value: object) -> dict[str, Any]:
    raw = _object(name, value)
    key = raw.get("key")
    if not isinstance(key, str) or not _KEY.match(key):
        raise ReportFieldRefused(f"{name}.key is {_shown(key)}, not a cache key")
    reused = raw.get("reused")
    if not isinstance(reused, bool):
        raise ReportFieldRefused(f"{name}.reused is {_shown(reused)}, not true or false")
    return {"key": key, "path": _text(f"{name}.path", raw.get("path"), 1024), "reused": reused}


def check_field(key: str, value: object, run_name: str) -> object:
    """One status field of a report, checked (:class:`ReportFieldRefused` names it)."""
    name = f"status.{key}"
    if key == STATUS_PROGRESS:
        return _text(name, value)
    if key == STATUS_PROGRESS_DETAIL:
        detail = _object(name, value)
        try:
            checked(detail)
        except DetailError as e:
            raise ReportFieldRefused(str(e)) from None
        return detail
    if key in (STATUS_PARTITION_SECONDS, STATUS_DELIVERY_SECONDS):
        return _number(name, value, MAX_SECONDS)
    if key == STATUS_DELIVERY_BYTES:
        return _number(name, value, MAX_BYTES, whole=True)
    if key == STATUS_MEMORY:
        return _object(name, value)
    if key == STATUS_PARTITIONS:
        return _partitions(name, value)
    if key == STATUS_RESUME:
        return _resume(name, value, run_name)
    raise ReportFieldRefused(f"{name} is not a field dglrun reports")


def _events(reporter: str, given: object, problems: list[str]) -> list[ReportEvent]:
    if given is None:
        return []
    if not isinstance(given, list):
        problems.append(f"{reporter}: events is {_shown(given)}, not a list")
        return []
    out: list[ReportEvent] = []
    for i, e in enumerate(given[:MAX_EVENTS]):
        name = f"{reporter}: events[{i}]"
        if not isinstance(e, dict):
            problems.append(f"{name} is not an object")
            continue
        seq, type_, reason, message = (e.get(k) for k in ("seq", "type", "reason", "message"))
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 < seq < 2**31:
            problems.append(f"{name}.seq is {_shown(seq)}, not a positive whole number")
        elif type_ not in EVENT_TYPES:
            problems.append(f"{name}.type is {_shown(type_)}, not one of {', '.join(EVENT_TYPES)}")
        elif not isinstance(reason, str) or not _REASON.match(reason):
            problems.append(f"{name}.reason is {_shown(reason)}, not a CamelCase word")
        elif not isinstance(message, str) or len(message) > MAX_MESSAGE:
            problems.append(f"{name}.message is not a string of at most {MAX_MESSAGE} characters")
        else:
            out.append(ReportEvent(reporter, seq, str(type_), reason, message))
    if len(given) > MAX_EVENTS:
        problems.append(f"{reporter}: {len(given)} events, only the first {MAX_EVENTS} taken")
    return out


def read(data: Mapping[str, object] | None, attempt: int, run_name: str) -> Reading:
    """The report of the running ``attempt`` in the ConfigMap's ``data`` (never raises).
    ``run_name``: the job's run folder's name (a resume point must be a file in it)."""
    out = Reading()
    for reporter in REPORTERS:
        raw = (data or {}).get(reporter)
        if raw is None:
            continue
        if not isinstance(raw, str) or len(raw) > MAX_DOCUMENT:
            out.problems.append(f"{reporter}: the report is larger than {MAX_DOCUMENT} bytes")
            continue
        try:
            doc = None if too_deep(raw, 2 * MAX_DEPTH) else json.loads(raw)
        except ValueError as e:
            out.problems.append(f"{reporter}: the report is not JSON ({e})")
            continue
        if not isinstance(doc, dict):
            out.problems.append(f"{reporter}: the report is not a JSON object of at most "
                                f"{2 * MAX_DEPTH} levels")  # fmt: skip
            continue
        given = doc.get(ATTEMPT)
        if isinstance(given, bool) or not isinstance(given, int):
            out.problems.append(f"{reporter}: attempt is {_shown(given)}, not a whole number")
            continue
        if given != attempt:
            continue  # another attempt's: not this one's to say
        status = doc.get(STATUS)
        if not isinstance(status, dict):
            out.problems.append(f"{reporter}: status is {_shown(status)}, not an object")
            status = {}
        for key, value in status.items():
            try:
                out.status[str(key)] = check_field(str(key), value, run_name)
            except ReportFieldRefused as e:
                out.problems.append(f"{reporter}: {e}")
        out.events += _events(reporter, doc.get(EVENTS), out.problems)
    return out
