"""Pods that cannot start, found early: what lets ``make demo`` stop within a minute of the
cause (a missing CNI plugin, an image that is not there, a crash loop) instead of after helm's
five-minute ``--wait``, and say why.

:func:`problems` is pure: from pods and events (raw JSON dicts, as ``kubectl get -o json``
gives them) it names, per pod that is not running, what keeps it from starting. A
:class:`StuckPods` watch polls them through kubectl and reports a problem once it has lasted
``grace`` seconds (a pod's first FailedScheduling or a slow image pull may resolve by itself)::

    stuck = StuckPods(kubectl, "dgl-system", "app.kubernetes.io/name=dgl-operator")
    while not ready():
        report = stuck.check()       # None, or the pod's waiting reason and its last events
        if report: raise SystemExit(report)
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.cluster import ClusterError, k8s_binaries

# A container waiting for one of these will not start without a change.
FATAL_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
# A Warning event with one of these reasons on a pod that is not running is its cause.
BLOCKING_EVENTS = frozenset(
    {
        "FailedCreatePodSandBox",
        "FailedMount",
        "FailedAttachVolume",
        "FailedScheduling",
        "Failed",
        "BackOff",
        "InspectFailed",
        "ErrImageNeverPull",
    }
)
GRACE_SECONDS = 20.0
LAST_EVENTS = 5

Kubectl = Callable[[Sequence[str]], str]  # kubectl's arguments -> its stdout (raises on failure)


def kubectl_runner(kubeconfig: Path, timeout: float = 30) -> Kubectl:
    """kubectl (hack/k8s-binaries.sh's) against ``kubeconfig``; raises ClusterError on failure."""
    binary = str(k8s_binaries("kubectl") / "kubectl")

    def run(args: Sequence[str]) -> str:
        try:
            out = subprocess.run(
                [binary, "--kubeconfig", str(kubeconfig), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise ClusterError(f"kubectl {' '.join(args)} timed out") from e
        if out.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    return run


@dataclass(frozen=True)
class Problem:
    pod: str
    reason: str
    message: str


def _waiting(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    states = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    return [(s.get("state") or {}).get("waiting") or {} for s in states]


def _running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") in ("Running", "Succeeded", "Failed") and not any(
        w.get("reason") in FATAL_WAITING for w in _waiting(pod)
    )


def _events_of(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
    return sorted(mine, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


def problems(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> dict[str, Problem]:
    """Per pod that has not started, what keeps it from starting: a container waiting for a
    reason in :data:`FATAL_WAITING`, else the newest Warning event of :data:`BLOCKING_EVENTS`."""
    found: dict[str, Problem] = {}
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name", "?"))
        if _running(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        fatal = [w for w in _waiting(pod) if w.get("reason") in FATAL_WAITING]
        if fatal:
            found[name] = Problem(name, str(fatal[0]["reason"]), str(fatal[0].get("message", "")))
            continue
        warnings = [
            e
            for e in _events_of(name, events)
            if e.get("type") == "Warning" and e.get("reason") in BLOCKING_EVENTS
        ]
        if warnings:
            last = warnings[-1]
            found[name] = Problem(name, str(last["reason"]), str(last.get("message", "")))
    return found


def describe(pod: dict[str, Any] | None, events: list[dict[str, Any]], problem: Problem) -> str:
    """The report: the pod's phase and waiting reasons, the cause, its last events."""
    phase = ((pod or {}).get("status") or {}).get("phase", "?")
    waiting = [str(w.get("reason")) for w in _waiting(pod or {}) if w.get("reason")]
    lines = [
        f"pod {problem.pod} cannot start ({phase}"
        + (f", waiting: {', '.join(waiting)}" if waiting else "")
        + f"): {problem.reason}: {problem.message.strip()[:600]}",
        "its last events:",
    ]
    for e in _events_of(problem.pod, events)[-LAST_EVENTS:]:
        count = e.get("count") or 1
        lines.append(
            f"  {e.get('type', '?'):7} {e.get('reason', '?')}"
            + (f" (x{count})" if count > 1 else "")
            + f": {str(e.get('message', '')).strip()[:300]}"
        )
    return "\n".join(lines)


class StuckPods:
    """Polls the pods of ``selector`` in ``namespace`` and their events; :meth:`check` returns a
    report once one pod's problem has lasted ``grace`` seconds (by ``clock``), else None."""

    def __init__(
        self,
        kubectl: Kubectl,
        namespace: str,
        selector: str,
        *,
        grace: float = GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kubectl, self._ns, self._selector = kubectl, namespace, selector
        self._grace, self._clock = grace, clock
        self._since: dict[tuple[str, str], float] = {}

    def _get(self, *args: str) -> list[dict[str, Any]]:
        out = self._kubectl(["-n", self._ns, "get", *args, "-o", "json"])
        items: list[dict[str, Any]] = json.loads(out).get("items") or []
        return items

    def check(self) -> str | None:
        """A report of the first pod stuck for ``grace`` seconds; None while none is, and when
        the API server does not answer (the caller's own deadline covers that)."""
        try:
            return self._check()
        except (ClusterError, ValueError):
            return None

    def _check(self) -> str | None:
        pods = self._get("pods", "-l", self._selector)
        events = self._get("events", "--field-selector", "involvedObject.kind=Pod") if pods else []
        now = self._clock()
        found = problems(pods, events)
        keys = {(p.pod, p.reason) for p in found.values()}
        self._since = {k: t for k, t in self._since.items() if k in keys}
        for problem in found.values():
            since = self._since.setdefault((problem.pod, problem.reason), now)
            if now - since >= self._grace:
                pod = next(
                    (p for p in pods if (p.get("metadata") or {}).get("name") == problem.pod), None
                )
                return describe(pod, events, problem)
        return None
