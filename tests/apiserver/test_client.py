"""dgl_operator.client and dglctl against the real API server, with the operator running in
this process and a test "kubelet" moving the pods (tests/support/live.py): create from a YAML
path, a dict and the typed job (new_job; what comes back is typed too); server-side dry run
and validation errors as kubectl words them; get, list, delete; suspend and resume; wait
returning on success and raising the operator's reason on failure; progress and events. (The
launcher's log and the results' copy need a kubelet: e2e/test_storage.py runs them on the real
cluster.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dgl_operator.client import (
    DGLJOBS,
    ApiRefused,
    DGLJob,
    DGLJobClient,
    InvalidJob,
    JobFailed,
    JobNotFound,
    MainContainer,
    ManifestError,
    NoResults,
    ResultsCopyFailed,
    RunPolicy,
    SchedulingPolicy,
    StorageSpec,
    WaitTimeout,
    new_job,
)
from kubeclient import PODS, RestClient
from localcluster.cluster import ControlPlane
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator, Kubelet
from tests.support.waiting import LIVE_TIMEOUT, wait_for

IMAGE = "dgloperator/graphsage:v0.1.0"


@pytest.fixture
def jobs(control_plane: ControlPlane, namespace: str) -> DGLJobClient:
    return DGLJobClient(namespace, kubeconfig=str(control_plane.kubeconfig))


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[InProcessOperator]:
    with InProcessOperator(str(control_plane.kubeconfig), namespace) as op:
        yield op


def seed(name: str, **spec: Any) -> dict[str, Any]:
    raw = load_fixture("seed_dgljob.yaml")
    del raw["metadata"]["namespace"]
    raw["metadata"]["name"] = name
    raw["spec"].update(spec)
    return raw


def dglctl(cp: ControlPlane, ns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dgl_operator", "--kubeconfig", str(cp.kubeconfig), "-n", ns, *argv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def pods(api: RestClient, ns: str) -> set[str]:
    return {p["metadata"]["name"] for p in api.list(PODS, ns)["items"]}


def test_create_from_a_yaml_path_a_dict_and_the_typed_spec(
    jobs: DGLJobClient, namespace: str, tmp_path: Path, control_plane: ControlPlane
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(seed("from-yaml")))
    created = jobs.create(path)
    assert created["metadata"]["namespace"] == namespace and created["metadata"]["uid"]
    jobs.create(seed("from-dict"))
    typed = new_job(
        "from-spec",
        launcher=MainContainer(
            image=IMAGE,
            name="dgl-graphsage",
            command=["dglrun"],
            args=["--graph-name", "graphsage", "--num-partitions", 3],
            env={"DGL_DATASET": "ogbn-synth"},
        ),
        workers=3,
        storage=StorageSpec(claim_name="results", share_partitions=True),
        run_policy=RunPolicy(backoff_limit=2, scheduling_policy=SchedulingPolicy(min_available=4)),
        labels={"team": "a"},
        pod={"securityContext": {"fsGroup": 1000}},
        extra={"cleanPodPolicy": "All"},
    )
    jobs.create(typed)

    got = jobs.get("from-spec")
    assert isinstance(got, DGLJob) and got.spec.workers == 3 and got.namespace == namespace
    assert got.spec.run_policy.scheduling_policy.min_available == 4
    spec = got["spec"]
    launcher = spec["dglReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert launcher["containers"][0]["args"][-1] == "3"  # (a string, as the CRD wants)
    assert launcher["containers"][0]["env"] == [{"name": "DGL_DATASET", "value": "ogbn-synth"}]
    assert launcher["securityContext"] == {"fsGroup": 1000}
    assert spec["dglReplicaSpecs"]["Worker"]["replicas"] == 3
    assert spec["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    assert spec["storage"] == {"claimName": "results", "sharePartitions": True}
    policy = {"backoffLimit": 2, "schedulingPolicy": {"minAvailable": 4}, "suspend": False}
    assert spec["runPolicy"] == policy  # (suspend: the CRD's default)
    assert spec["cleanPodPolicy"] == "All" and got["metadata"]["labels"] == {"team": "a"}
    assert [j["metadata"]["name"] for j in jobs.list()] == ["from-dict", "from-spec", "from-yaml"]

    listed = dglctl(control_plane, namespace, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    head = ["NAME", "PHASE", "WORKERS", "SCALE", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    assert lines[0].split() == head
    assert [ln.split()[0] for ln in lines[1:]] == ["from-dict", "from-spec", "from-yaml"]
    as_json = json.loads(dglctl(control_plane, namespace, "get", "from-dict", "-o", "json").stdout)
    assert as_json["metadata"]["name"] == "from-dict" and as_json["kind"] == "DGLJob"


def test_dry_run_stores_nothing_and_errors_read_as_kubectls(
    jobs: DGLJobClient, namespace: str, tmp_path: Path, control_plane: ControlPlane
) -> None:
    out = jobs.create(seed("checked"), dry_run=True)
    assert out["metadata"]["name"] == "checked"
    with pytest.raises(JobNotFound, match=f'dgljob "checked" not found in namespace "{namespace}"'):
        jobs.get("checked")

    unknown = seed("unknown-field")
    unknown["spec"]["partitionModes"] = "DGL-API"
    with pytest.raises(ApiRefused) as e:
        jobs.create(unknown, dry_run=True)
    assert str(e.value).startswith("Error from server (BadRequest): ")
    assert 'unknown field "spec.partitionModes"' in str(e.value)

    bad = seed("bad-mode", partitionMode="Bogus")
    with pytest.raises(ApiRefused) as e:
        jobs.create(bad, dry_run=True)
    assert str(e.value).startswith("Error from server (Invalid): ")
    assert "spec.partitionMode" in str(e.value) and '"Bogus"' in str(e.value)

    with pytest.raises(ManifestError, match=r"nope\.yaml: cannot read the manifest"):
        jobs.create(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: DGLJob\nmetadata: {name: x\n")
    with pytest.raises(ManifestError, match=r"broken\.yaml: not valid YAML \(line \d+\)"):
        jobs.create(broken)
    two = tmp_path / "two.yaml"
    two.write_text(
        yaml.safe_dump_all([{"kind": "Namespace", "metadata": {"name": "x"}}, seed("a")])
    )
    with pytest.raises(ManifestError, match=r"two\.yaml: expected exactly one DGLJob document"):
        jobs.create(two)
    other = seed("elsewhere")
    other["metadata"]["namespace"] = "somewhere-else"
    with pytest.raises(ManifestError, match='does not match the namespace "' + namespace):
        jobs.create(other)

    # dglctl: one line, no traceback, exit 1
    unknown_file = tmp_path / "unknown.yaml"
    unknown_file.write_text(yaml.safe_dump(unknown))
    cli = dglctl(control_plane, namespace, "submit", str(unknown_file), "--dry-run")
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert cli.stderr.startswith("error: Error from server (BadRequest): ")
    assert len(cli.stderr.strip().splitlines()) == 1
    ok = dglctl(control_plane, namespace, "submit", "-f", str(broken.with_name("ok.yaml")))
    assert ok.returncode == 1 and "ok.yaml: cannot read the manifest" in ok.stderr
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(seed("good")))
    cli = dglctl(control_plane, namespace, "submit", str(good), "--dry-run")
    assert cli.returncode == 0 and cli.stdout == "dgljob.qihoo.net/good created (server dry run)\n"
    assert dglctl(control_plane, namespace, "list").stderr.startswith("No resources found")


def test_what_only_the_parser_refuses_is_named_before_anything_is_stored(
    jobs: DGLJobClient,
    namespace: str,
    tmp_path: Path,
    control_plane: ControlPlane,
    api: RestClient,
) -> None:
    """The CRD admits a memory limit of 6K (a pod's admission would refuse it); the client
    names the field and why before it stores the job. A job stored anyway (through the raw
    API) is left out of list() but not of dglctl's, and get() names its field."""
    bad = seed("six-k")
    worker = bad["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker.setdefault("resources", {}).setdefault("limits", {})["memory"] = "6K"
    field = "spec.dglReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory"
    for dry_run in (True, False):
        with pytest.raises(InvalidJob) as e:
            jobs.create(bad, dry_run=dry_run)
        assert field in str(e.value) and "'6K'" in str(e.value), str(e.value)
    with pytest.raises(JobNotFound):
        jobs.get("six-k")
    path = tmp_path / "six-k.yaml"
    path.write_text(yaml.safe_dump(bad))
    cli = dglctl(control_plane, namespace, "submit", str(path))
    assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr
    assert field in cli.stderr and len(cli.stderr.strip().splitlines()) == 1, cli.stderr

    api.create(DGLJOBS, namespace, {**bad, "metadata": {"name": "six-k", "namespace": namespace}})
    jobs.create(seed("fine"))
    assert [j.name for j in jobs.list()] == ["fine"]
    assert [j["metadata"]["name"] for j in jobs.list_raw()] == ["fine", "six-k"]
    with pytest.raises(InvalidJob, match=r"six-k has an invalid spec: .*limits\.memory") as got:
        jobs.get("six-k")
    assert got.value.raw["metadata"]["name"] == "six-k"
    listed = dglctl(control_plane, namespace, "list")
    assert listed.returncode == 0, listed.stderr
    assert [ln.split()[0] for ln in listed.stdout.splitlines()[1:]] == ["fine", "six-k"]
    shown = dglctl(control_plane, namespace, "get", "six-k", "-o", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["metadata"]["name"] == "six-k"


def test_wait_returns_once_succeeded_and_progress_follows_the_epochs(
    jobs: DGLJobClient, namespace: str, operator: InProcessOperator, api: RestClient
) -> None:
    jobs.create(seed("ok"))
    kubelet = Kubelet(api, namespace)
    wait_for(lambda: {"ok-worker-0", "ok-worker-1", "ok-partitioner"} <= pods(api, namespace),
             what="the pods", timeout=LIVE_TIMEOUT)  # fmt: skip
    with pytest.raises(WaitTimeout, match=r"dgljob ok did not reach Succeeded within 1s \(phase"):
        jobs.wait("ok", timeout=1)

    readings: list[Any] = []
    watcher = threading.Thread(target=lambda: readings.extend(jobs.progress("ok", timeout=120)))
    watcher.start()
    waited: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: waited.update(jobs.wait("ok", timeout=120).raw))
    waiter.start()
    for i, name in enumerate(["ok-worker-0", "ok-worker-1", "ok-partitioner"]):
        kubelet.run(name, f"10.0.9.{i + 1}")
    wait_for(
        lambda: "ok-launcher" in pods(api, namespace), what="the launcher", timeout=LIVE_TIMEOUT
    )
    kubelet.finish("ok-partitioner", seconds=3)
    kubelet.run("ok-launcher", "10.0.9.9")
    jobs.wait("ok", until="Training", timeout=LIVE_TIMEOUT)
    for epoch in (1, 2):  # (what dglrun patches)
        progress = {"status": {"progress": f"5/5 train: epoch {epoch}/2"}}
        api.patch(DGLJOBS, namespace, "ok", progress, subresource="status")
        wait_for(lambda e=epoch: any(r.epoch == e for r in readings), what=f"epoch {epoch}",
                 timeout=LIVE_TIMEOUT)  # fmt: skip
    assert not waited
    kubelet.finish("ok-launcher")
    waiter.join(60)
    watcher.join(60)
    assert waited["status"]["phase"] == "Completed"
    assert readings[-1].ended == "Succeeded"
    epochs = [(r.epoch, r.epochs) for r in readings if r.epochs]
    assert epochs[:2] == [(1, 2), (2, 2)], readings
    assert readings[0].phase in ("Pending", "Partitioning", "")
    # (the operator's Events come from a thread of their own, after the status they tell of)
    reasons = wait_for(
        lambda: (r := [e["reason"] for e in jobs.events("ok")]) and "DGLJobSucceeded" in r and r,
        what="the DGLJobSucceeded Event", timeout=LIVE_TIMEOUT,
    )  # fmt: skip
    assert reasons[0] == "DGLJobCreated"

    with pytest.raises(NoResults, match=r"dgljob ok has no spec\.storage"):
        jobs.results("ok", "unused")


def test_dglctl_report_reads_the_job_its_pods_and_events_and_names_what_it_cannot(
    jobs: DGLJobClient, namespace: str, operator: InProcessOperator, api: RestClient,
    control_plane: ControlPlane, tmp_path: Path,
) -> None:  # fmt: skip
    """The report of a job run by a test kubelet: a row per pod the API server holds (the
    workers deleted at the end, cleanPodPolicy Running, are in the operator's Event; the test
    kubelet makes no pod Events to know them by), the operator's Events; the launcher's log on a
    node that is not there: said on the page. Bad input is one line: a job that is not
    there, a page that cannot be written."""
    jobs.create(seed("seen"))
    kubelet = Kubelet(api, namespace)
    names = ["seen-worker-0", "seen-worker-1", "seen-partitioner"]
    wait_for(lambda: set(names) <= pods(api, namespace), what="the pods", timeout=LIVE_TIMEOUT)
    for i, name in enumerate(names):
        kubelet.run(name, f"10.0.7.{i + 1}")
    kubelet.finish("seen-partitioner", seconds=3)
    wait_for(lambda: "seen-launcher" in pods(api, namespace), what="the launcher",
             timeout=LIVE_TIMEOUT)  # fmt: skip
    kubelet.run("seen-launcher", "10.0.7.9")
    jobs.wait("seen", until="Training", timeout=LIVE_TIMEOUT)
    # --watch: the page reloads itself while the job runs, and is written once more at its end
    watched = tmp_path / "watched.html"
    watch = subprocess.Popen(
        [sys.executable, "-m", "dgl_operator", "--kubeconfig", str(control_plane.kubeconfig),
         "-n", namespace, "report", "seen", "-o", str(watched), "--watch", "--interval", "1s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: watched.exists() and "http-equiv='refresh'" in watched.read_text(),
                 what="the page of the running job", timeout=LIVE_TIMEOUT)  # fmt: skip
        assert ": Training</h1>" in watched.read_text()
        kubelet.finish("seen-launcher")
        out, err = watch.communicate(timeout=LIVE_TIMEOUT)
    finally:
        watch.kill()
    assert watch.returncode == 0, err
    assert out.strip() == f"{watched}: written (the job ended)"
    assert "refresh" not in watched.read_text() and " (Succeeded)</h1>" in watched.read_text()
    jobs.wait("seen", timeout=LIVE_TIMEOUT)

    # the Events the report must show: the recorder sends them one by one from its own thread,
    # so the last of them, the workers' deletion, is waited for too
    def said() -> str:
        return "\n".join(f"{e['reason']}: {e.get('message')}" for e in jobs.events("seen"))

    wait_for(
        lambda: "DGLJobSucceeded" in said() and "Deleted 2 pods: seen-worker-{0..1}" in said(),
        what="the DGLJobSucceeded Event and the workers' deletion",
        timeout=LIVE_TIMEOUT,
    )

    # the launcher bound to a node that is not there: its log cannot be read
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "seen-launcher"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "ghost"}}  # fmt: skip
    api.create(PODS, namespace, binding, name="seen-launcher", subresource="binding")
    page = tmp_path / "seen.html"
    cli = dglctl(control_plane, namespace, "report", "seen", "-o", str(page))
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith(f"{page}: Succeeded, ")
    html = page.read_text()
    assert 'data-row="launcher #1 (ghost)"' in html and 'data-row="partitioner #1 (' in html
    assert "DGLJobSucceeded" in html and "DGLJobCreated" in html
    assert "Deleted 2 pods: seen-worker-{0..1}" in html
    assert f"the log of pod {namespace}/seen-launcher could not be read" in html

    missing = dglctl(control_plane, namespace, "report", "nope", "-o", str(tmp_path / "x.html"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: ")
    assert "nope" in missing.stderr and "Traceback" not in missing.stderr
    unwritable = tmp_path / "no" / "such" / "folder" / "seen.html"
    bad = dglctl(control_plane, namespace, "report", "seen", "-o", str(unwritable))
    assert bad.returncode == 1, bad.stderr
    assert bad.stderr == (
        f"error: cannot write the report to {unwritable}: No such file or directory\n"
    )


def test_wait_raises_the_operators_reason_when_the_job_fails(
    jobs: DGLJobClient, namespace: str, operator: InProcessOperator, api: RestClient,
    control_plane: ControlPlane,
) -> None:  # fmt: skip
    jobs.create(seed("broken"))
    kubelet = Kubelet(api, namespace)
    wait_for(
        lambda: "broken-worker-1" in pods(api, namespace), what="worker 1", timeout=LIVE_TIMEOUT
    )
    kubelet.run("broken-worker-1", "10.0.8.2")
    kubelet.finish("broken-worker-1", exit_code=3)
    with pytest.raises(JobFailed) as e:
        jobs.wait("broken", timeout=LIVE_TIMEOUT)
    assert e.value.reason == "WorkerFailed"
    assert "broken-worker-1" in e.value.message and "3" in e.value.message
    assert str(e.value).startswith("dgljob broken failed: WorkerFailed: ")
    cli = dglctl(control_plane, namespace, "wait", "broken", "--timeout", "30s")
    assert cli.returncode == 1 and cli.stderr.startswith(
        "error: dgljob broken failed: WorkerFailed"
    )
    # a wait for something else that can no longer come raises too
    with pytest.raises(JobFailed, match="WorkerFailed"):
        jobs.wait("broken", until="Training", timeout=LIVE_TIMEOUT)


def test_suspend_resume_and_delete(
    jobs: DGLJobClient, namespace: str, operator: InProcessOperator, api: RestClient,
    control_plane: ControlPlane,
) -> None:  # fmt: skip
    jobs.create(seed("held"))
    wait_for(lambda: "held-worker-0" in pods(api, namespace), what="the pods", timeout=LIVE_TIMEOUT)
    jobs.suspend("held")
    suspended = jobs.wait("held", until="Suspended", timeout=LIVE_TIMEOUT)
    assert suspended["spec"]["runPolicy"]["suspend"] is True
    wait_for(lambda: not pods(api, namespace), what="the pods deleted", timeout=LIVE_TIMEOUT)
    cli = dglctl(control_plane, namespace, "resume", "held")
    assert cli.returncode == 0 and cli.stdout == "dgljob.qihoo.net/held resumed\n", cli.stderr
    wait_for(
        lambda: "held-worker-0" in pods(api, namespace), what="pods again", timeout=LIVE_TIMEOUT
    )
    assert jobs.get("held")["spec"]["runPolicy"]["suspend"] is False
    wait_for(
        lambda: "DGLJobResumed" in [e["reason"] for e in jobs.events("held")],
        what="the DGLJobResumed Event", timeout=LIVE_TIMEOUT,
    )  # fmt: skip
    assert list(jobs.logs("held")) == []  # (no launcher yet: nothing, at once)
    cli = dglctl(control_plane, namespace, "logs", "held")
    assert cli.returncode == 0 and cli.stdout == ""
    assert cli.stderr.startswith("dglctl: dgljob held has no launcher log yet (phase ")

    # results: a non-empty destination is refused before any pod is made
    dest = Path(control_plane.kubeconfig).parent / "not-empty"
    dest.mkdir(exist_ok=True)
    (dest / "mine.txt").write_text("keep")
    job = jobs.get("held").raw
    job["spec"]["storage"] = {"claimName": "c"}
    job["status"]["results"] = "c:/runs/held-1/output"
    from dgl_operator.client import results as results_mod

    with pytest.raises(ResultsCopyFailed, match="not-empty is not empty"):
        results_mod.copy(jobs.api, results_mod.source_of(job), dest)
    assert (dest / "mine.txt").read_text() == "keep"
    assert not any(p.endswith("-results-") for p in pods(api, namespace))

    jobs.delete("held", wait=True, timeout=LIVE_TIMEOUT)
    with pytest.raises(JobNotFound):
        jobs.get("held")
    gone = dglctl(control_plane, namespace, "get", "held")
    assert gone.returncode == 1
    assert gone.stderr == f'error: dgljob "held" not found in namespace "{namespace}"\n'
