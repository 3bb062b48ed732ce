"""Whether the listed pods have reached the wait mode: a pure function of their last states."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kubeclient import Obj
from podcontract import WATCH_FINISHED, WATCH_READY, WATCH_SERVED


class Mode(StrEnum):
    READY = WATCH_READY  # every pod is Running and its Ready condition is True
    FINISHED = WATCH_FINISHED  # every pod is Succeeded
    SERVED = WATCH_SERVED  # every pod is Ready, or Succeeded (it served and has finished)


@dataclass(frozen=True)
class Outcome:
    done: bool  # every pod reached the mode
    failed: str | None = None  # why one pod can never reach it (names the pod), else None
    waiting: list[str] = field(default_factory=list)  # pods not there yet, in the given order


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_ready(pod: Obj) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _first_line(text: Any, limit: int = 200) -> str:
    lines = str(text or "").strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _failure_detail(pod: Obj) -> str:
    """The most telling reason a finished pod gives: the first container that exited non-zero
    (init containers first), else the pod's own reason and message."""
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            term = ((cs or {}).get("state") or {}).get("terminated") or {}
            code = term.get("exitCode")
            if term and code not in (None, 0):
                out = f"container {cs.get('name')} exited with code {code}"
                if term.get("reason"):
                    out += f" ({term['reason']})"
                msg = _first_line(term.get("message"))
                return f"{out}: {msg}" if msg else out
    reason, msg = str(status.get("reason") or ""), _first_line(status.get("message"))
    if reason and msg:
        return f"{reason}: {msg}"
    return reason or msg


def _waiting_reason(pod: Obj) -> str:
    """Why a pending pod is not running yet, if a container says (ImagePullBackOff, ...)."""
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            waiting = ((cs or {}).get("state") or {}).get("waiting") or {}
            if waiting.get("reason") and waiting["reason"] != "PodInitializing":
                return str(waiting["reason"])
    return ""


def describe(pod: Obj | None) -> str:
    """A pod's state in a few words, for the progress and timeout messages."""
    if pod is None:
        return "not found"
    phase = _phase(pod) or "no phase yet"
    parts = [phase]
    if phase == "Pending":
        reason = _waiting_reason(pod)
        if reason:
            parts.append(reason)
    elif phase == "Running" and not is_ready(pod):
        parts.append("not ready")
    if _terminating(pod):
        parts.append("terminating")
    return ", ".join(parts)


def _failure(mode: Mode, name: str, pod: Obj) -> str | None:
    phase = _phase(pod)
    if phase == "Failed":
        detail = _failure_detail(pod)
        return f"pod {name} is Failed" + (f": {detail}" if detail else "")
    if phase == "Succeeded" and mode == Mode.READY:
        return f"pod {name} is Succeeded: it has exited and can never become ready"
    return None


def _reached(mode: Mode, pod: Obj) -> bool:
    phase = _phase(pod)
    if mode == Mode.FINISHED or (mode == Mode.SERVED and phase == "Succeeded"):
        return phase == "Succeeded"
    return phase == "Running" and is_ready(pod) and not _terminating(pod)


def evaluate(mode: Mode | str, names: Sequence[str], pods_by_name: Mapping[str, Obj]) -> Outcome:
    """Where the pods ``names`` stand in ``mode`` given their last known states.

    A pod absent from ``pods_by_name`` is waited for. The first failed pod (in ``names``
    order) makes the outcome failed: Failed in either mode, Succeeded in ``ready`` mode.
    """
    mode = Mode(mode)
    waiting: list[str] = []
    for name in names:
        pod = pods_by_name.get(name)
        if pod is None:
            waiting.append(name)
            continue
        failure = _failure(mode, name, pod)
        if failure is not None:
            return Outcome(done=False, failed=failure, waiting=[])
        if not _reached(mode, pod):
            waiting.append(name)
    return Outcome(done=not waiting, failed=None, waiting=waiting)
