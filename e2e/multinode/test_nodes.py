"""The multi-node cluster itself: 3 Ready nodes with their own addresses, a pod network
that spans them, and the Coscheduling scheduler placing a PodGroup's pods only as a gang."""

from __future__ import annotations

import subprocess
from typing import Any

from e2e.helpers import apply
from e2e.multinode.helpers import NODES, MultiNode
from localcluster.cluster import k8s_binaries
from localcluster.node import API_IP, IMAGE_TAG
from tests.support.waiting import wait_for

SERVER = f"docker.io/dgloperator/dgl-operator:{IMAGE_TAG}"  # (has python3)
PAUSE = f"docker.io/dgloperator/pause:{IMAGE_TAG}"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pinned_server(ns: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "http",
                    "image": SERVER,
                    "command": ["python3", "-m", "http.server", "8080"],
                }
            ],
        },
    }


def group(ns: str, name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member},
    }


def member(ns: str, name: str, group_name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {GROUP_LABEL: group_name}},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "pause", "image": PAUSE}]},
    }


def exec_python(multinode: MultiNode, ns: str, pod: str, code: str) -> str:
    """kubectl exec of a Python program (not through pytest-kubernetes, which goes through a
    shell)."""
    kubectl = str(k8s_binaries("kubectl") / "kubectl")
    argv = [kubectl, "--kubeconfig", str(multinode.kubeconfig), "exec", "-n", ns, pod, "--"]
    out = subprocess.run(
        [*argv, "python3", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, (pod, out.stdout, out.stderr)
    return out.stdout


def get_pod(cluster: Any, ns: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = cluster.kubectl(["get", "pod", name, "-n", ns])
    return pod


def test_three_nodes_share_one_pod_network_and_coscheduling_places_gangs(
    cluster: Any, namespace: str, multinode: MultiNode
) -> None:
    # 3 Ready nodes, each with an address of its own
    nodes = {n["metadata"]["name"]: n for n in cluster.kubectl(["get", "nodes"])["items"]}
    assert sorted(nodes) == sorted(multinode.nodes) and len(nodes) == NODES, sorted(nodes)
    ips = {}
    for name, node in nodes.items():
        conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conds["Ready"] == "True", (name, conds)
        (ips[name],) = [
            a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"
        ]
    assert len(set(ips.values())) == NODES, ips

    # a server pinned to each node; each reaches the others' pods and the API server
    servers = {f"net-{i}": node for i, node in enumerate(multinode.nodes, 1)}
    for pod, node in servers.items():
        apply(cluster, pinned_server(namespace, pod, node))

    def all_running() -> dict[str, str] | None:
        found = {p: get_pod(cluster, namespace, p) for p in servers}
        if all(f["status"].get("phase") == "Running" for f in found.values()):
            return {p: f["status"]["podIP"] for p, f in found.items()}
        return None

    pod_ips = wait_for(
        all_running, what="a server pod Running on every node", timeout=300, interval=1.0
    )
    assert len(set(pod_ips.values())) == NODES, pod_ips
    for pod in servers:
        others = [ip for p, ip in pod_ips.items() if p != pod]
        probe = (
            "import socket, urllib.request\n"
            f"for ip in {others!r}:\n"
            "    print(ip, urllib.request.urlopen(f'http://{ip}:8080/', timeout=10).status)\n"
            f"socket.create_connection(('{API_IP}', 443), timeout=10).close()\n"
            "print('api reachable')\n"
        )
        out = exec_python(multinode, namespace, pod, probe)
        for ip in others:
            assert f"{ip} 200" in out, (pod, out)
        assert "api reachable" in out, (pod, out)

    # the second scheduler binds a PodGroup's pods once minMember of them exist ...
    scheduler = multinode.scheduler
    apply(cluster, group(namespace, "short", 3))
    for i in (1, 2):
        apply(cluster, member(namespace, f"short-{i}", "short", scheduler))
    apply(cluster, group(namespace, "gang", 2))
    for i in (1, 2):
        apply(cluster, member(namespace, f"gang-{i}", "gang", scheduler))

    def bound(names: list[str]) -> dict[str, str] | None:
        found = {n: get_pod(cluster, namespace, n)["spec"].get("nodeName") for n in names}
        return found if all(found.values()) else None

    placed = wait_for(
        lambda: bound(["gang-1", "gang-2"]),
        what="the gang's 2 pods bound",
        timeout=120,
        interval=1.0,
    )
    assert set(placed.values()) <= set(multinode.nodes), placed

    # ... and none of a group short of its minMember (the scheduler says why)
    def refused(name: str) -> dict[str, Any] | None:
        pod = get_pod(cluster, namespace, name)
        for c in pod["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return pod
        return None

    for name in ("short-1", "short-2"):
        pending = wait_for(
            lambda n=name: refused(n),
            what=f"{name} refused by the scheduler",
            timeout=120,
            interval=1.0,
        )
        assert not pending["spec"].get("nodeName"), pending["spec"].get("nodeName")
