"""evaluate(): every mode against every pod state."""

from __future__ import annotations

import pytest

from kubeclient import Obj
from tests.watcher_loop.helpers import pod
from watcher_loop.state import Mode, Outcome, describe, evaluate


def one(mode: Mode | str, p: Obj | None) -> Outcome:
    return evaluate(mode, ["w-0"], {} if p is None else {"w-0": p})


# (phase, ready condition) -> expected outcome kind, per mode
CASES = [
    # mode, phase, ready, expected
    (Mode.READY, None, False, "waiting"),  # pod not created yet
    (Mode.READY, "", False, "waiting"),  # no phase yet
    (Mode.READY, "Pending", False, "waiting"),
    (Mode.READY, "Running", False, "waiting"),
    (Mode.READY, "Running", True, "done"),
    (Mode.READY, "Unknown", False, "waiting"),
    (Mode.READY, "Succeeded", False, "failed"),  # can never become ready
    (Mode.READY, "Failed", False, "failed"),
    (Mode.FINISHED, None, False, "waiting"),
    (Mode.FINISHED, "", False, "waiting"),
    (Mode.FINISHED, "Pending", False, "waiting"),
    (Mode.FINISHED, "Running", False, "waiting"),
    (Mode.FINISHED, "Running", True, "waiting"),
    (Mode.FINISHED, "Unknown", False, "waiting"),
    (Mode.FINISHED, "Succeeded", False, "done"),
    (Mode.FINISHED, "Failed", False, "failed"),
    # the partitioner over HTTP: Ready (serving), or Succeeded (it served every worker and
    # finished: a launcher made again mid-training finds it so); READY's twin above fails it
    (Mode.SERVED, None, False, "waiting"),
    (Mode.SERVED, "Pending", False, "waiting"),
    (Mode.SERVED, "Running", False, "waiting"),
    (Mode.SERVED, "Running", True, "done"),
    (Mode.SERVED, "Succeeded", False, "done"),
    (Mode.SERVED, "Failed", False, "failed"),
]


@pytest.mark.parametrize(("mode", "phase", "ready", "expected"), CASES)
def test_every_mode_and_state(mode: Mode, phase: str | None, ready: bool, expected: str) -> None:
    out = one(mode, None if phase is None else pod("w-0", phase, ready))
    if expected == "done":
        assert out == Outcome(done=True, failed=None, waiting=[])
    elif expected == "waiting":
        assert out == Outcome(done=False, failed=None, waiting=["w-0"])
    else:
        assert not out.done
        assert out.failed is not None
        assert out.failed.startswith(f"pod w-0 is {phase}")


def test_mode_may_be_given_as_a_string() -> None:
    assert one("ready", pod("w-0", "Running", True)).done
    assert one("finished", pod("w-0", "Succeeded")).done
    with pytest.raises(ValueError):
        one("running", pod("w-0", "Running", True))


def test_ready_needs_the_ready_condition_not_just_running() -> None:
    p = pod("w-0", "Running")
    p["status"]["conditions"] = [{"type": "ContainersReady", "status": "True"}]
    assert not one(Mode.READY, p).done
    p["status"].pop("conditions")
    assert not one(Mode.READY, p).done


def test_a_terminating_pod_is_not_ready() -> None:
    p = pod("w-0", "Running", True)
    p["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert one(Mode.READY, p) == Outcome(done=False, failed=None, waiting=["w-0"])
    assert describe(p) == "Running, terminating"


def test_a_terminating_succeeded_pod_has_finished() -> None:
    p = pod("w-0", "Succeeded")
    p["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert one(Mode.FINISHED, p).done


def test_several_pods_wait_in_the_given_order() -> None:
    names = ["w-0", "w-1", "w-2", "w-10"]
    pods = {
        "w-10": pod("w-10", "Pending"),
        "w-1": pod("w-1", "Running", True),
        "w-0": pod("w-0", "Running", False),
    }
    assert evaluate(Mode.READY, names, pods) == Outcome(False, None, ["w-0", "w-2", "w-10"])
    pods = {n: pod(n, "Running", True) for n in names}
    assert evaluate(Mode.READY, names, pods) == Outcome(True, None, [])


def test_one_failed_pod_fails_the_lot_first_in_order() -> None:
    names = ["w-0", "w-1", "w-2"]
    pods = {
        "w-0": pod("w-0", "Running", True),
        "w-1": pod("w-1", "Failed"),
        "w-2": pod("w-2", "Failed"),
    }
    out = evaluate(Mode.READY, names, pods)
    assert not out.done
    assert out.failed == "pod w-1 is Failed"


def test_pods_not_listed_do_not_matter() -> None:
    pods = {"w-0": pod("w-0", "Running", True), "other": pod("other", "Failed")}
    assert evaluate(Mode.READY, ["w-0"], pods).done


def test_no_names_is_done() -> None:
    assert evaluate(Mode.READY, [], {}) == Outcome(True, None, [])


def test_failure_names_the_failing_container() -> None:
    p = pod(
        "w-0",
        "Failed",
        containerStatuses=[
            {"name": "side", "state": {"terminated": {"exitCode": 0}}},
            {
                "name": "main",
                "state": {
                    "terminated": {"exitCode": 137, "reason": "OOMKilled", "message": "x\ny"}
                },
            },
        ],
    )
    out = one(Mode.FINISHED, p)
    assert out.failed == "pod w-0 is Failed: container main exited with code 137 (OOMKilled): x"


def test_failure_names_an_init_container_first() -> None:
    p = pod(
        "w-0",
        "Failed",
        initContainerStatuses=[
            {"name": "kubectl-download", "state": {"terminated": {"exitCode": 1}}}
        ],
        containerStatuses=[{"name": "main", "state": {"waiting": {"reason": "PodInitializing"}}}],
    )
    assert one(Mode.READY, p).failed == (
        "pod w-0 is Failed: container kubectl-download exited with code 1"
    )


def test_failure_gives_the_pod_reason_without_container_details() -> None:
    p = pod("w-0", "Failed", reason="Evicted", message="The node was low on resource: memory.")
    assert one(Mode.READY, p).failed == (
        "pod w-0 is Failed: Evicted: The node was low on resource: memory."
    )


def test_succeeded_in_ready_mode_says_why_it_fails() -> None:
    failed = one(Mode.READY, pod("w-0", "Succeeded")).failed
    assert failed == "pod w-0 is Succeeded: it has exited and can never become ready"


def test_describe() -> None:
    assert describe(None) == "not found"
    assert describe(pod("w-0", "Pending")) == "Pending"
    assert describe(pod("w-0", "Running")) == "Running, not ready"
    assert describe(pod("w-0", "Running", True)) == "Running"
    p = pod(
        "w-0",
        "Pending",
        containerStatuses=[{"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}}],
    )
    assert describe(p) == "Pending, ImagePullBackOff"
    p = pod("w-0")
    p["status"] = {}
    assert describe(p) == "no phase yet"
