"""The FAKE kubectl cluster of the kubectl transport tests: "pods" are folders bind-mounted in
private mount namespaces, driven through fixtures/fake_kubectl.py and fake_kubexec.sh; dglrun,
its phases and its verification are real (test_kubectl_transport.py, test_http_transfer.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.launcher.helpers import FIXTURES, fake_partition
from tests.support.paths import REPO

TRAIN = str(FIXTURES / "fake_train.py")


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "cluster"
        self.ws = tmp / "ws"
        for d in (self.dir / "pods", self.dir / "status", self.ws):
            d.mkdir(parents=True)
        (self.dir / "calls.log").write_text("")
        self.env = {
            "FAKE_CLUSTER": str(self.dir),
            "FAKE_WS": str(self.ws),
            "DGL_OPERATOR_KUBEXEC_PATH": str(FIXTURES / "fake_kubexec.sh"),
            "DGL_OPERATOR_KUBECTL_PATH": str(FIXTURES / "fake_kubectl.py"),
            "DGL_OPERATOR_HOSTFILE_PATH": str(self.dir / "hostfile"),
            "DGL_OPERATOR_LEADFILE_PATH": str(self.dir / "leadfile"),
            "DGL_OPERATOR_PARTFILE_PATH": str(self.dir / "partfile"),
            # the copy path (partitionTransfer KubectlCp); HTTP: test_http_transfer.py
            "DGL_OPERATOR_PARTITION_TRANSFER": "kubectl",
            "PYTHONPATH": str(REPO),
        }

    def pod_ws(self, pod: str) -> Path:
        return self.dir / "pods" / pod / "ws"

    def init_container(self, pod: str, name: str, state: str) -> None:
        status = {"status": {"initContainerStatuses": [{"name": name, "state": {state: {}}}]}}
        (self.dir / "status" / f"{pod}.json").write_text(json.dumps(status))

    def calls(self, prefix: str) -> int:
        return sum(
            line.startswith(prefix) for line in (self.dir / "calls.log").read_text().splitlines()
        )

    def partition(self, parts: int = 2) -> None:
        fake_partition(self.ws, parts)


def dglrun_args(c: Cluster, *extra: str) -> list[str]:
    """dglrun's arguments for graph ``g`` in 2 parts in the cluster's workspace."""
    workspace = ["--workspace", str(c.ws), "--python", sys.executable]
    return ["-g", "g", "--num-partitions", "2", *workspace, *extra]


def launcher_args(c: Cluster, *extra: str) -> list[str]:
    return dglrun_args(c, "--train-entry-point", TRAIN, *extra)


def partitioner_args(c: Cluster) -> list[str]:
    return dglrun_args(c, "--partition-entry-point", str(FIXTURES / "fake_partition.py"))


def progress_log(c: Cluster, job: str = "job") -> list[str]:
    path = c.dir / "progress" / f"{job}.log"
    return path.read_text().splitlines() if path.exists() else []
