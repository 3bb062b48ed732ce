"""A FAKE cluster for the tests of dglrun in its pods (test_launcher_in_a_pod.py,
test_http_transfer.py): no Kubernetes, but real programs.

What is fake: only the pods' isolation. A "pod" is a folder, bind-mounted over the workspace
($FAKE_WS) in a private mount namespace of its own (so each pod has its own files at the same
path), and its IP is a loopback address (127.0.0.x, the hostfile's) in this machine's network
namespace. The API server is fixtures/fake_kubectl.py and fake_kubexec.sh, which dglrun still
uses on the partitioner's side only (``kubectl cp`` into the launcher pod, ``kubectl get pod``,
the progress patches); every call is logged to calls.log.

What is real: dglrun (the launcher, the partitioner), the worker pods' agents (``python -m
workeragent`` in each pod's namespace, on the hostfile's IP and the cluster's agent port, with
the cluster's token), the processes they run (the fake DGL servers and trainers of
fixtures/fake_train.py, the pullers, mpirun's daemons and ranks) and everything between them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from launcher.workers.hostfile import parse_hostfile
from localcluster.ports import free_port
from tests.launcher.helpers import FIXTURES, fake_partition
from tests.support.paths import REPO
from tests.support.waiting import wait_for
from workeragent.client import AgentAddress, AgentClient, AgentProcStatus

TRAIN = str(FIXTURES / "fake_train.py")
SERVING = "dgl-agent: serving on "
# a pod's agent in its own mount namespace, the pod's folder over the workspace:
# sh -c SCRIPT <pod folder> <workspace> <agent argv...>
IN_POD = 'mount --bind "$0" "$1" && cd "$1" && shift && exec "$@"'


@dataclass
class Agent:
    """A worker pod's agent: its process (the pid is the agent's: unshare and sh exec it)."""

    pod: str
    ip: str
    proc: subprocess.Popen[bytes]
    log: Path

    def mount_ns(self) -> str:
        return os.readlink(f"/proc/{self.proc.pid}/ns/mnt")


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "cluster"
        self.ws = tmp / "ws"
        for d in (self.dir / "pods", self.dir / "status", self.ws):
            d.mkdir(parents=True)
        (self.dir / "calls.log").write_text("")
        # the job's token (its Secret): the agents and the partition server ask it
        self.token_file = self.dir / "token"
        self.token_file.write_text(secrets.token_hex(16) + "\n")
        self.token_file.chmod(0o600)
        self.agent_port = free_port()
        self.agents: dict[str, Agent] = {}
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

    # -- the worker pods' agents ----------------------------------------------------------

    def start_agents(self, **pod_env: str) -> None:
        """Start the agent of every pod the hostfile names, as the pod's main process, with
        this environment and ``pod_env`` (the pod template's env: what the processes the
        agent starts see, e.g. fake_train.py's FAKE_FAIL_RANK); back once each serves."""
        hosts = parse_hostfile((self.dir / "hostfile").read_text())
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **pod_env}
        for host in hosts:
            folder = self.pod_ws(host.name)
            folder.mkdir(parents=True, exist_ok=True)
            log = self.dir / "pods" / host.name / "agent.log"
            serve = [sys.executable, "-m", "workeragent", "--host", host.ip,
                     "--port", str(self.agent_port), "--token-file", str(self.token_file),
                     "--orphan-grace", "0"]  # fmt: skip
            argv = ["unshare", "--mount", "--propagation", "private",
                    "sh", "-c", IN_POD, str(folder), str(self.ws), *serve]  # fmt: skip
            with log.open("wb") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
            self.agents[host.name] = Agent(host.name, host.ip, proc, log)
        for agent in self.agents.values():
            wait_for(lambda a=agent: self._serving(a), what=f"{agent.pod}'s agent", timeout=30)

    def _serving(self, agent: Agent) -> bool:
        text = agent.log.read_text(errors="replace")
        if agent.proc.poll() is not None:
            raise AssertionError(f"{agent.pod}'s agent exited {agent.proc.returncode}: {text}")
        return SERVING in text

    def client(self, pod: str) -> AgentClient:
        agent = self.agents[pod]
        address = AgentAddress(pod, agent.ip, self.agent_port)
        return AgentClient(address, self.token_file.read_text().strip(), unreachable_after=10)

    def agent_procs(self, pod: str) -> list[AgentProcStatus]:
        """The processes ``pod``'s agent ran or runs, as its API lists them."""
        return self.client(pod).list()

    def pause(self, pod: str) -> None:
        """``pod``'s agent stops answering (SIGSTOP: its connections hang)."""
        os.kill(self.agents[pod].proc.pid, signal.SIGSTOP)

    def pod_processes(self) -> list[str]:
        """``<pod>: <pid> <command>`` of every process running in a worker pod but its
        agent (found by its mount namespace: the pod's); zombies are not running."""
        pods = {a.mount_ns(): a for a in self.agents.values() if a.proc.poll() is None}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                agent = pods.get(os.readlink(entry / "ns" / "mnt"))
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if agent is None or int(entry.name) == agent.proc.pid or state in "ZX":
                    continue
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{agent.pod}: {entry.name} {cmd.strip()}")
        return found

    def assert_pods_empty(self) -> None:
        """Nothing but its agent runs in any worker pod (waiting a little: a process the
        agent stopped may take a moment to be reaped), and no agent lists a process as
        running."""
        left: list[str] = []

        def empty() -> bool:
            left[:] = self.pod_processes()
            return not left

        try:
            wait_for(empty, what="the worker pods to hold nothing but their agents", timeout=20)
        except AssertionError as e:
            raise AssertionError(f"{e}; still running: {left}") from None
        for pod in self.agents:
            running = [p.id for p in self.agent_procs(pod) if p.running]
            assert running == [], f"{pod}'s agent still runs {running}"

    def close(self) -> None:
        """Stop every agent (SIGTERM: it stops its processes first)."""
        for agent in self.agents.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent.proc.pid, signal.SIGCONT)  # (a paused one)
                agent.proc.terminate()
        for agent in self.agents.values():
            try:
                agent.proc.wait(30)
            except subprocess.TimeoutExpired:
                agent.proc.kill()
                agent.proc.wait()
        self.agents = {}

    # -- the fake API server --------------------------------------------------------------

    def init_container(self, pod: str, name: str, state: str) -> None:
        status = {"status": {"initContainerStatuses": [{"name": name, "state": {state: {}}}]}}
        (self.dir / "status" / f"{pod}.json").write_text(json.dumps(status))

    def calls(self, prefix: str) -> int:
        return sum(
            line.startswith(prefix) for line in (self.dir / "calls.log").read_text().splitlines()
        )

    def worker_calls(self) -> list[str]:
        """kubectl calls that reached a worker pod (``exec job-worker-*``, ``cp`` from or
        to one): with the agents there is none."""
        lines = (self.dir / "calls.log").read_text().splitlines()
        return [
            line
            for line in lines
            if line.startswith("exec job-worker-")
            or (line.startswith("cp ") and "job-worker-" in line)
        ]

    def partition(self, parts: int = 2) -> None:
        fake_partition(self.ws, parts)


def dglrun_args(c: Cluster, *extra: str) -> list[str]:
    """dglrun's arguments for graph ``g`` in 2 parts in the cluster's workspace."""
    workspace = ["--workspace", str(c.ws), "--python", sys.executable]
    return ["-g", "g", "--num-partitions", "2", *workspace, *extra]


def launcher_args(c: Cluster, *extra: str) -> list[str]:
    """The launcher's: the workers' agents on the cluster's port, with the job's token."""
    agents = ["--transfer-token-file", str(c.token_file), "--agent-port", str(c.agent_port)]
    return dglrun_args(c, "--train-entry-point", TRAIN, *agents, *extra)


def partitioner_args(c: Cluster) -> list[str]:
    return dglrun_args(c, "--partition-entry-point", str(FIXTURES / "fake_partition.py"))


def progress_log(c: Cluster, job: str = "job") -> list[str]:
    path = c.dir / "progress" / f"{job}.log"
    return path.read_text().splitlines() if path.exists() else []
