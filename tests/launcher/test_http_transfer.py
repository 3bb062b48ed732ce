"""dglrun's HTTP data path between its pod roles, over the FAKE cluster of fake_cluster.py:
a partitioner (dglrun, Partitioner phase) serves on loopback, the launcher's dglrun has every
worker pull its own part from it, through the worker's agent. Real: dglrun, the server, the
workers' agents, the pullers, their HTTP, the job's token and the checksums; fake: only the
pods' isolation (mount namespaces, loopback IPs) and the API server (fake_kubectl.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.checksums import manifest
from localcluster.ports import free_port
from tests.launcher.fake_cluster import Cluster, launcher_args, progress_log
from tests.launcher.helpers import FIXTURES
from tests.support.paths import REPO


class Served:
    def __init__(self, cluster: Cluster, tmp: Path) -> None:
        self.cluster = cluster
        self.port = free_port()
        self.token = cluster.token_file  # the job's: the partition server's and the agents'
        self.pws = tmp / "partitioner-ws"  # the partitioner pod's own disk
        self.env = {
            **os.environ,
            **cluster.env,
            "DGL_OPERATOR_PARTITION_TRANSFER": "http",
            "DGL_OPERATOR_JOB_NAME": "job",
        }
        (cluster.dir / "partfile").write_text("127.0.0.1 30050 job-partitioner\n")
        (cluster.dir / "hostfile").write_text(
            "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
        )
        cluster.start_agents()
        self.proc: subprocess.Popen[str] | None = None

    def transfer_args(self) -> list[str]:
        return ["--transfer-port", str(self.port), "--transfer-token-file", str(self.token)]

    def start_partitioner(self) -> None:
        argv = [sys.executable, "-m", "launcher.cli", "-g", "g", "--num-partitions", "2",
                "--workspace", str(self.pws), "--python", sys.executable,
                "--partition-entry-point", str(FIXTURES / "fake_partition.py"),
                "--deliver-timeout", "120", *self.transfer_args()]  # fmt: skip
        env = {**self.env, "DGL_OPERATOR_PHASE_ENV": "Partitioner", "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()[0]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ready", timeout=2):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the partitioner did not start serving")

    def launcher(self, *extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "launcher.cli", *launcher_args(self.cluster),
                *self.transfer_args(), *extra]  # fmt: skip
        return subprocess.run(
            argv, env={**self.env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip

    def stop(self) -> str:
        if self.proc is None:
            return ""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.communicate(timeout=60)[0]


@pytest.fixture
def served(tmp_path: Path, root_needed: None) -> Iterator[Served]:
    cluster = Cluster(tmp_path)
    try:
        s = Served(cluster, tmp_path)
        yield s
        s.stop()
    finally:
        cluster.close()


def test_workers_pull_their_parts_straight_from_the_partitioner(served: Served) -> None:
    served.start_partitioner()
    proc = served.launcher()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    url = f"http://127.0.0.1:{served.port}"
    assert f"[2/5] deliver: the partitioner pod serves the parts at {url}" in out
    source = manifest(served.pws / "dataset")
    for i in (0, 1):
        wl = served.cluster.pod_ws(f"job-worker-{i}") / "workload"
        got = manifest(wl)
        assert got["g.json"] == source["g.json"]
        mine = {k: v for k, v in source.items() if k.startswith(f"part{i}/")}
        assert mine and all(got[k] == v for k, v in mine.items())
        assert not any(k.startswith(f"part{1 - i}/") for k in got), "another worker's part"
        size = sum(v[0] for v in mine.values()) + source["g.json"][0]
        assert f"[job-worker-{i}/pull] pull: part {i}: {size}/{size} bytes (100%)" in out
    assert f"pulled by 2 workers from {url} in" in out and "SHA-256 verified" in out
    # nothing went through kubectl: the pulls ran, and the results came back, through the
    # workers' agents
    assert served.cluster.worker_calls() == []
    assert (
        json.loads((served.cluster.ws / "output" / "metrics.json").read_text())["world_size"] == 2
    )
    served.cluster.assert_pods_empty()
    # the partitioner stopped serving once told every worker has its part
    assert served.proc is not None and served.proc.wait(30) == 0
    partitioner_out = served.stop()
    assert re.search(r"served to [123] pods", partitioner_out), partitioner_out
    sent = progress_log(served.cluster)
    assert any(t.startswith("3/5 dispatch: ") and t.endswith(" MB") for t in sent) or (
        "3/5 dispatch" in sent
    ), sent
    statuses = [
        json.loads(line)
        for line in (served.cluster.dir / "progress" / "job.status.jsonl").read_text().splitlines()
    ]
    delivered = [s for s in statuses if "deliveryBytes" in s]
    total = sum(v[0] for v in source.values()) + source["g.json"][0]  # g.json: once each
    assert delivered and delivered[-1]["deliveryBytes"] == total
    assert delivered[-1]["deliverySeconds"] > 0
    assert any("partitionSeconds" in s for s in statuses)


def test_a_wrong_token_is_one_clear_line(served: Served, tmp_path: Path) -> None:
    served.start_partitioner()
    bad = tmp_path / "bad-token"
    bad.write_text("guess\n")
    proc = served.launcher("--transfer-token-file", str(bad))
    assert proc.returncode == 1
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: dispatch failed: pod job-partitioner: reading the "
                           "manifest: the server "
                           "answered 401 missing or wrong transfer token"), last  # fmt: skip


def test_a_partitioner_that_is_gone_fails_the_launcher_naming_it(served: Served) -> None:
    proc = served.launcher()  # nobody serves
    assert proc.returncode == 1
    last = proc.stdout.strip().splitlines()[-1]
    assert f"cannot reach the partition server http://127.0.0.1:{served.port}" in last, last
    assert "after 6 attempts" in last
