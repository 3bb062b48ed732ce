"""The faults a soak injects: one entry per kind in :data:`FAULTS`. Each strikes what runs
when it happens, drawn with the fault's own generator (soak/plan.py), and says what it did:
the objects it struck (the jobs among them: a job a fault struck may fail, one none struck may
not), and, for a fault with a second half (a node powered on again, a job resumed, a node
uncordoned), what to do after how long.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from localcluster.kubectl import Obj
from localcluster.node import restart_apiserver, start_node, stop_node
from soak.invariants import live
from soak.world import JOB_LABEL, REPLICA_TYPE_LABEL, World, kill_pod


@dataclass
class Struck:
    """What a fault did."""

    what: str  # one line: the fault and its objects
    jobs: set[str] = field(default_factory=set)  # "<namespace>/<name>" of the jobs it struck
    after: float = 0.0  # seconds until ``then`` runs
    then: Callable[[], str] | None = None  # the second half; returns what it did
    nodes: set[str] = field(default_factory=set)  # nodes it took away (for the next faults)


@dataclass
class Scene:
    """What the faults choose from, at the time one happens."""

    world: World
    namespaces: tuple[str, ...]
    nodes: list[str]
    down: set[str]  # nodes powered off or drained now (a fault leaves at most one away)

    def pods(self) -> list[Obj]:
        return [p for ns in self.namespaces for p in self.world.items("pods", ns)]

    def job_pods(self, replica_type: str | None = None) -> list[Obj]:
        return [
            p
            for p in self.pods()
            if live(p)
            and (p.get("status") or {}).get("phase") == "Running"
            and JOB_LABEL in (p["metadata"].get("labels") or {})
            and (
                replica_type is None
                or p["metadata"]["labels"].get(REPLICA_TYPE_LABEL) == replica_type
            )
        ]

    def jobs_on(self, node: str) -> set[str]:
        return {
            job_of(p)
            for p in self.pods()
            if live(p)
            and p["spec"].get("nodeName") == node
            and JOB_LABEL in (p["metadata"].get("labels") or {})
        }

    def running_jobs(self) -> list[Obj]:
        return [
            j
            for ns in self.namespaces
            for j in self.world.items("dgljobs", ns)
            if (j.get("status") or {}).get("phase") not in (None, "Completed", "Failed")
            and not j["metadata"].get("deletionTimestamp")
        ]


Inject = Callable[[Scene, random.Random], Struck | None]  # None: nothing to strike now


def struck_while_away(pods: list[Obj], away: dict[str, str]) -> dict[str, str]:
    """The jobs a node's fault struck after it struck: ``away`` maps each node powered off
    or drained now to its fault; a job's live pod bound to one (placed there after the fault
    listed the node's jobs, as the scheduler does until the node is seen NotReady) is struck
    by that fault. Returns "<namespace>/<name>" -> the fault."""
    return {
        job_of(p): away[p["spec"]["nodeName"]]
        for p in pods
        if live(p)
        and p["spec"].get("nodeName") in away
        and JOB_LABEL in (p["metadata"].get("labels") or {})
    }


def job_of(pod: Obj) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['labels'][JOB_LABEL]}"


def _kill(replica_type: str) -> Inject:
    def inject(scene: Scene, rng: random.Random) -> Struck | None:
        pods = scene.job_pods(replica_type)
        if not pods:
            return None
        pod = rng.choice(sorted(pods, key=lambda p: p["metadata"]["name"]))
        killed = kill_pod(pod["metadata"]["uid"])
        if not killed:  # (its node is powered off: the API does not know yet)
            return None
        return Struck(
            f"killed {killed} process(es) of {replica_type.lower()} pod "
            f"{pod['metadata']['namespace']}/{pod['metadata']['name']} on "
            f"{pod['spec'].get('nodeName')}",
            {job_of(pod)},
        )

    return inject


def delete_launcher(scene: Scene, rng: random.Random) -> Struck | None:
    """A training job's launcher pod deleted (as an eviction or a drain would): the operator
    makes it again and it re-attaches to the trainers the workers' agents kept. It strikes no
    job: a restart (or a failure) of that job is a violation."""
    training = {
        f"{j['metadata']['namespace']}/{j['metadata']['name']}"
        for j in scene.running_jobs()
        if (j.get("status") or {}).get("phase") == "Training"
        and (j.get("spec") or {}).get("partitionMode") != "Skip"  # (its launcher trains)
    }
    pods = [p for p in scene.job_pods("Launcher") if job_of(p) in training]
    if not pods:
        return None
    pod = rng.choice(sorted(pods, key=lambda p: p["metadata"]["name"]))
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    scene.world.run("delete", "pod", name, "-n", ns, "--wait=false")
    return Struck(f"deleted launcher pod {ns}/{name} mid-training (it re-attaches)")


def kill_leader(scene: Scene, rng: random.Random) -> Struck | None:
    leader = scene.world.leader()
    pods = {p["metadata"]["name"]: p for p in scene.world.operator_pods()}
    if leader not in pods:
        return None
    killed = kill_pod(pods[leader]["metadata"]["uid"])
    if not killed:  # (its node is powered off: the Lease names it until it expires)
        return None
    return Struck(f"killed {killed} process(es) of the operator's leader {leader}")


def _spare(scene: Scene, rng: random.Random) -> str | None:
    """A node to take away: none while one is away (two of three gone leaves too little)."""
    if scene.down:
        return None
    return rng.choice(scene.nodes)


def _naming(jobs: set[str]) -> str:
    return f": jobs {', '.join(sorted(jobs))} ran there" if jobs else ": no job ran there"


def power_cycle(scene: Scene, rng: random.Random) -> Struck | None:
    node = _spare(scene, rng)
    if node is None:
        return None
    jobs = scene.jobs_on(node)
    stop_node(scene.world.dir, node)
    off = rng.uniform(30, 60)

    def power_on() -> str:
        start_node(scene.world.dir, node)
        return f"node {node} powered on again"

    return Struck(
        f"powered node {node} off for {off:.0f}s{_naming(jobs)}", jobs, off, power_on, {node}
    )


def drain(scene: Scene, rng: random.Random) -> Struck | None:
    node = _spare(scene, rng)
    if node is None:
        return None
    jobs = scene.jobs_on(node)
    scene.world.run(
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=120s",
        check=False,
    )
    back = rng.uniform(20, 60)

    def uncordon() -> str:
        scene.world.run("uncordon", node)
        return f"node {node} uncordoned"

    return Struck(
        f"drained node {node} (uncordoned after {back:.0f}s){_naming(jobs)}",
        jobs,
        back,
        uncordon,
        {node},
    )


def apiserver(scene: Scene, rng: random.Random) -> Struck | None:
    down = rng.uniform(0, 5)
    took = restart_apiserver(scene.world.dir, down_for=down)
    return Struck(f"restarted the API server (not serving for {took:.1f}s)")


def evict(scene: Scene, rng: random.Random) -> Struck | None:
    pods = scene.job_pods()
    if not pods:
        return None
    pod = rng.choice(sorted(pods, key=lambda p: p["metadata"]["name"]))
    meta = pod["metadata"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    scene.world.create_raw(
        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction", body
    )
    return Struck(f"evicted pod {meta['namespace']}/{meta['name']} (eviction API)", {job_of(pod)})


def suspend_resume(scene: Scene, rng: random.Random) -> Struck | None:
    """A queued job is suspended as Kueue's users do: its Workload deactivated (Kueue
    suspends the job: its pods go, its quota is given back), and activated again later."""
    jobs = scene.running_jobs()
    if not jobs:
        return None
    job = rng.choice(sorted(jobs, key=lambda j: j["metadata"]["name"]))
    ns, name, uid = job["metadata"]["namespace"], job["metadata"]["name"], job["metadata"]["uid"]
    workloads = [
        w
        for w in scene.world.items("workloads.kueue.x-k8s.io", ns)
        if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])
    ]
    if not workloads:
        return None
    wl = workloads[0]["metadata"]["name"]

    def active(value: bool) -> None:
        patch = json.dumps({"spec": {"active": value}})
        scene.world.run(
            "patch", "workloads.kueue.x-k8s.io", wl, "-n", ns, "--type=merge", "-p", patch
        )

    active(False)
    back = rng.uniform(15, 45)

    def resume() -> str:
        active(True)
        return f"job {ns}/{name} resumed (Workload {wl} active again)"

    return Struck(
        f"suspended job {ns}/{name} (Workload {wl} deactivated) for {back:.0f}s",
        {f"{ns}/{name}"},
        back,
        resume,
    )


def delete_job(scene: Scene, rng: random.Random) -> Struck | None:
    jobs = scene.running_jobs()
    if not jobs:
        return None
    job = rng.choice(sorted(jobs, key=lambda j: j["metadata"]["name"]))
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    scene.world.run("delete", "dgljob", name, "-n", ns, "--wait=false")
    return Struck(
        f"deleted job {ns}/{name} mid-run ({job['status'].get('phase')})", {f"{ns}/{name}"}
    )


FAULTS: dict[str, Inject] = {
    "kill-leader": kill_leader,
    "kill-worker": _kill("Worker"),
    "kill-launcher": _kill("Launcher"),
    "delete-launcher": delete_launcher,
    "kill-partitioner": _kill("Partitioner"),
    "power-cycle-node": power_cycle,
    "restart-apiserver": apiserver,
    "evict-pod": evict,
    "suspend-resume": suspend_resume,
    "delete-job": delete_job,
    "drain-node": drain,
}
DELETES = "delete-job"  # (the jobs it strikes end Deleted)
