"""The operator's side of the contract: the files and env it builds are what watcher-loop reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.api import parse_job
from controller.builders import BuildOptions
from controller.builders.configmap import config_map
from controller.builders.pods import launcher_pod, worker_pod
from podcontract import HOSTFILE_PATH, PARTFILE_PATH, WATCHER_PARTITIONER, WATCHER_WORKERS
from watcher_loop.config import load_config
from watcher_loop.podfile import parse_pod_file
from watcher_loop.state import Mode


def job(workers: int, **spec: Any) -> Any:
    container = {"name": "main", "image": "img", "command": ["dglrun"]}
    template = {"spec": {"containers": [container]}}
    return parse_job(
        {
            "apiVersion": "qihoo.net/v1alpha1",
            "kind": "DGLJob",
            "metadata": {"name": "gs", "namespace": "team", "uid": "u1"},
            "spec": {
                "slotsPerWorker": 4,
                **spec,
                "dglReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": template},
                    "Worker": {"replicas": workers, "template": template},
                },
            },
        }
    )


def ip_pod(name: str, ip: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"podIP": ip}}


def test_config_map_files_parse() -> None:
    j = job(12)
    pods = {n: ip_pod(n, f"10.1.0.{i}") for i, n in enumerate(j.worker_names())}
    pods[j.partitioner_name] = ip_pod(j.partitioner_name, "10.1.1.1")
    pods[j.launcher_name] = ip_pod(j.launcher_name, "10.1.1.2")
    data = config_map(j, pods)["data"]
    assert parse_pod_file(data["hostfile"]) == j.worker_names()
    assert parse_pod_file(data["partfile"]) == [j.partitioner_name]
    assert parse_pod_file(data["leadfile"]) == []  # the launcher never waits for itself


@pytest.mark.parametrize(
    ("transfer", "partitioner_mode"),
    [("HTTP", Mode.SERVED), ("KubectlCp", Mode.SERVED)],  # (KubectlCp is served as HTTP)
)
def test_watcher_init_containers_configure_watcher_loop(
    transfer: str, partitioner_mode: Mode
) -> None:
    j = job(3, partitionTransfer=transfer)
    pod = launcher_pod(j, BuildOptions())
    inits = {c["name"]: c for c in pod["spec"]["initContainers"]}
    for name, file, mode, expected in (
        (WATCHER_PARTITIONER, PARTFILE_PATH, partitioner_mode, 1),
        (WATCHER_WORKERS, HOSTFILE_PATH, Mode.READY, 3),
    ):
        env = {e["name"]: e["value"] for e in inits[name]["env"]}
        config = load_config(env, namespace_file=Path("/nonexistent"))
        assert (config.file, config.mode, config.namespace, config.expected_pods) == (
            Path(file),
            mode,
            "team",
            expected,
        )


def test_pods_carry_the_label_the_watch_selects_on() -> None:
    j = job(2)
    worker = worker_pod(j, 1)
    name = worker["metadata"]["name"]
    assert worker["metadata"]["labels"]["dgl-replica-name"] == name
