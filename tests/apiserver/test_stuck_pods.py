"""``make demo``'s early stop, against a real API server: the test plays the kubelet (a pod
left ContainerCreating with the kubelet's FailedCreatePodSandBox event), kubectl reads them, and
:class:`StuckPods` reports the pod once its cause has lasted the grace period (fake time)."""

from __future__ import annotations

from typing import Any

from kubeclient import EVENTS, PODS, RestClient
from localcluster.cluster import ControlPlane
from localcluster.stuck import StuckPods, kubectl_runner

CNI = 'plugin type="bridge" failed (add): failed to find plugin "bridge" in path [/usr/lib/cni]'


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "stuck-test"}},
        "spec": {"containers": [{"name": "main", "image": "example/never:1"}]},
    }


def _sandbox_failure(ns: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod['metadata']['name']}.sandbox", "namespace": ns},
        "involvedObject": {
            "kind": "Pod",
            "name": pod["metadata"]["name"],
            "namespace": ns,
            "uid": pod["metadata"]["uid"],
        },
        "type": "Warning",
        "reason": "FailedCreatePodSandBox",
        "message": f"Failed to create pod sandbox: failed to setup network for sandbox: {CNI}",
        "count": 4,
        "firstTimestamp": "2026-11-25T10:00:00Z",
        "lastTimestamp": "2026-11-25T10:00:30Z",
        "source": {"component": "kubelet"},
    }


def _watch(cp: ControlPlane, namespace: str, *, grace: float, now: list[float]) -> StuckPods:
    """The test's pods (app=stuck-test) watched through real kubectl, on the test's clock."""
    return StuckPods(
        kubectl_runner(cp.kubeconfig),
        namespace,
        "app=stuck-test",
        grace=grace,
        clock=lambda: now[0],
    )


def test_a_pod_whose_sandbox_fails_is_reported_after_the_grace_period(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    now = [0.0]
    stuck = _watch(control_plane, namespace, grace=20, now=now)
    assert stuck.check() is None  # no pods yet
    created = api.create(PODS, namespace, _pod("operator-0"))
    waiting = {
        "containerStatuses": [
            {
                "name": "main",
                "image": "example/never:1",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
        "phase": "Pending",
    }
    api.patch(PODS, namespace, "operator-0", {"status": waiting}, subresource="status")
    assert stuck.check() is None  # creating, no cause yet
    api.create(EVENTS, namespace, _sandbox_failure(namespace, created))
    assert stuck.check() is None  # the cause is new: it may still resolve
    now[0] = 19.0
    assert stuck.check() is None
    now[0] = 20.5
    report = stuck.check()
    assert report is not None
    assert report.splitlines()[0].startswith(
        "pod operator-0 cannot start (Pending, waiting: ContainerCreating): FailedCreatePodSandBox"
    )
    assert 'failed to find plugin "bridge"' in report and "(x4)" in report


def test_a_pod_that_starts_running_is_forgotten(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    now = [0.0]
    stuck = _watch(control_plane, namespace, grace=5, now=now)
    created = api.create(PODS, namespace, _pod("worker-0"))
    api.create(EVENTS, namespace, _sandbox_failure(namespace, created))
    assert stuck.check() is None
    api.patch(PODS, namespace, "worker-0", {"status": {"phase": "Running"}}, subresource="status")
    now[0] = 60.0
    assert stuck.check() is None  # running now: the old warning is no cause any more
