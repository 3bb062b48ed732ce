"""Which pods cannot start, and why (localcluster/stuck.py's pure part)."""

from __future__ import annotations

from typing import Any

from localcluster.stuck import describe, problems


def pod(name: str, phase: str = "Pending", **waiting: str) -> dict[str, Any]:
    statuses = [{"name": "main", "state": {"waiting": dict(waiting)}}] if waiting else []
    return {"metadata": {"name": name}, "status": {"phase": phase, "containerStatuses": statuses}}


def event(name: str, reason: str, message: str, kind: str = "Warning", count: int = 1) -> Any:
    return {
        "involvedObject": {"kind": "Pod", "name": name},
        "type": kind,
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": f"2026-11-25T10:00:{count:02d}Z",
    }


CNI = (
    'failed to setup network for sandbox "abc": plugin type="bridge" failed (add): '
    'failed to find plugin "bridge" in path [/usr/lib/cni]'
)


def test_a_sandbox_that_cannot_be_made_is_the_cause_of_a_pod_still_creating() -> None:
    pods = [pod("op", reason="ContainerCreating")]
    events = [
        event("op", "Scheduled", "assigned", kind="Normal"),
        event("op", "FailedCreatePodSandBox", CNI, count=3),
    ]
    (found,) = problems(pods, events).values()
    assert (found.pod, found.reason) == ("op", "FailedCreatePodSandBox")
    report = describe(pods[0], events, found)
    assert report.startswith("pod op cannot start (Pending, waiting: ContainerCreating)")
    assert 'failed to find plugin "bridge"' in report
    assert "Normal  Scheduled: assigned" in report and "FailedCreatePodSandBox (x3)" in report


def test_a_fatal_waiting_reason_wins_over_events_and_a_running_pod_has_no_problem() -> None:
    pods = [
        pod("a", reason="ErrImageNeverPull", message="image x not present"),
        pod("b", phase="Running"),
        pod("c", phase="Running", reason="CrashLoopBackOff", message="back-off 10s"),
    ]
    events = [event("a", "FailedScheduling", "old"), event("b", "FailedMount", "transient")]
    found = problems(pods, events)
    assert sorted(found) == ["a", "c"]
    assert found["a"].reason == "ErrImageNeverPull" and found["c"].reason == "CrashLoopBackOff"


def test_normal_events_and_unrelated_warnings_are_no_problem() -> None:
    pods = [pod("p", reason="ContainerCreating"), pod("q")]
    events = [event("p", "Pulling", "pulling", kind="Normal"), event("p", "Unhealthy", "probe")]
    assert problems(pods, events) == {}


def test_a_deleted_pod_is_not_reported() -> None:
    gone = pod("p", reason="CrashLoopBackOff")
    gone["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    assert problems([gone], []) == {}
