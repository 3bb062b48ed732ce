"""The DGLJobs the benchmarks run: the partition benchmarks' own (a hostPath graph, one
partition per worker), and the example's manifests renamed and edited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench.support.paths import EXAMPLE

NS = "dgl-bench"  # the partition benchmarks' namespace
EVAL_FAN_OUT = "15,15"  # sampled evaluation: full neighbourhoods are slow on 2 cores


def job_manifest(mode: str, data: Path, epochs: int, workers: int = 2) -> dict[str, Any]:
    """The benchmarks' DGLJob: ``workers`` Worker pods, one partition each."""
    name = f"bench-{mode.lower()}"
    args = ["--graph-name", "graphsage", "--num-partitions", str(workers), "--balance-train",
            "--balance-edges", "--train-entry-point", "code/train_dist.py", "--num-epochs",
            str(epochs), "--batch-size", "128", f"--train-args=--eval_fan_out {EVAL_FAN_OUT}",
            "--partition-timeout", "3600"]  # fmt: skip
    if mode == "DGL-API":
        data_args = "--dataset ogbn-synth --dataset_root /data/raw_data"
        args += ["--partition-entry-point", "code/load_and_partition_graph.py",
                 "--partition-args", data_args]  # fmt: skip
    container = {"name": "dgl-graphsage", "image": "dgloperator/graphsage:v0.1.0"}
    worker = {
        **container,
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    spec: dict[str, Any] = {
        "partitionMode": mode,
        "cleanPodPolicy": "None",
        "dglReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {
                    "spec": {"containers": [{**container, "command": ["dglrun"], "args": args}]}
                },
            },
            "Worker": {
                "replicas": workers,
                "template": {
                    "spec": {
                        "containers": [worker],
                        "volumes": [
                            {"name": "data", "hostPath": {"path": str(data), "type": "Directory"}}
                        ],
                    }
                },
            },
        },
    }
    if mode != "DGL-API":
        spec["chunkedGraph"] = {"path": "/data/chunked", "layout": "Shared"}
    return {
        "apiVersion": "qihoo.net/v1alpha1",
        "kind": "DGLJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def example_job(file: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """examples/graphsage/``file`` named ``name`` (in ``namespace``; None: the file's)."""
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / file).read_text())
    job["metadata"]["name"] = name
    if namespace is not None:
        job["metadata"]["namespace"] = namespace
    return job


def main_container(job: dict[str, Any], replica: str) -> dict[str, Any]:
    """The first container of ``replica``'s pod template (Launcher: dglrun's)."""
    container: dict[str, Any] = job["spec"]["dglReplicaSpecs"][replica]["template"]["spec"][
        "containers"
    ][0]
    return container


def launcher_args(job: dict[str, Any]) -> list[str]:
    """dglrun's arguments in ``job`` (the list itself: changing it changes the job)."""
    args: list[str] = main_container(job, "Launcher")["args"]
    return args


def set_flag(args: list[str], flag: str, value: str) -> None:
    """The value after ``flag`` in ``args``, replaced by ``value``."""
    args[args.index(flag) + 1] = value


KUEUE_API = "kueue.x-k8s.io/v1beta2"
FLAVOR = "default-flavor"


def kueue_queues(
    namespace: str, cluster_queue: str, local_queue: str, quota: dict[str, str]
) -> list[dict[str, Any]]:
    """What a benchmark queues its jobs in: the ResourceFlavor ``default-flavor`` (any node),
    the ClusterQueue ``cluster_queue`` of ``quota`` (resource -> nominal quota, the resources
    it covers), open to every namespace, and the LocalQueue ``local_queue`` in ``namespace``."""
    resources = [{"name": name, "nominalQuota": value} for name, value in quota.items()]
    group = {"coveredResources": list(quota), "flavors": [{"name": FLAVOR, "resources": resources}]}
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
         "spec": {}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
         "spec": {"namespaceSelector": {}, "resourceGroups": [group]}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": local_queue, "namespace": namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]  # fmt: skip
