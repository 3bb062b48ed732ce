"""The generated children against the proposal's resulting pods, field by field."""

from __future__ import annotations

import base64
import copy
from dataclasses import replace
from typing import Any

import pytest

from controller.api import parse_job
from controller.builders import ATTEMPT_ANNOTATION, JOB_NAME_LABEL, BuildOptions
from controller.builders.configmap import KUBEXEC_SCRIPT, config_map, hostfile
from controller.builders.desired import desired
from controller.builders.env import shm_size_limit
from controller.builders.pods import launcher_pod, partitioner_pod, worker_pod
from controller.builders.rbac import rbac
from controller.builders.service import worker_service
from controller.features import transfer
from podcontract.quantity import format_bytes, parse_quantity
from tests.support.dgljobs import load_fixture

SEED_OPTS = BuildOptions(
    kubectl_download_image="dgloperator/kubectl-download:v0.1.0",
    watcher_loop_image="dgloperator/watcher-loop:v0.1.0",
    init_image_pull_policy="Always",
)
# Keys of list items that identify them, so lists compare item by item.
_ID_KEYS = ("name", "key", "mountPath", "containerPort")


def _ident(item: Any) -> Any:
    if isinstance(item, dict):
        for k in _ID_KEYS:
            if k in item:
                return (k, item[k])
    return None


def assert_matches_seed(seed: Any, got: Any, path: str = "") -> None:
    """Every field of ``seed`` is in ``got`` with the same value (``got`` may add fields).
    Named list items are matched by name and must keep the seed's relative order."""
    if isinstance(seed, dict):
        assert isinstance(got, dict), f"{path}: expected an object, got {got!r}"
        for k, v in seed.items():
            assert k in got, f"{path}.{k}: missing (generated: {sorted(got)})"
            if k == "sizeLimit":
                assert parse_quantity(got[k]) == parse_quantity(v), f"{path}.{k}"
                continue
            assert_matches_seed(v, got[k], f"{path}.{k}")
    elif isinstance(seed, list) and seed and all(_ident(i) for i in seed):
        assert isinstance(got, list), f"{path}: expected a list"
        got_ids = [_ident(i) for i in got]
        positions = []
        for item in seed:
            ident = _ident(item)
            assert ident in got_ids, f"{path}: no item with {ident} in {got_ids}"
            pos = got_ids.index(ident)
            positions.append(pos)
            assert_matches_seed(item, got[pos], f"{path}[{ident[1]}]")
        assert positions == sorted(positions), f"{path}: order differs from the seed"
    else:
        assert got == seed, f"{path}: seed has {seed!r}, generated {got!r}"


def _without_main_pull_policy(seed: dict[str, Any]) -> dict[str, Any]:
    """imagePullPolicy of the user's containers comes from their template (the seed's pods
    show the API server's default for their image), not from the operator."""
    seed = copy.deepcopy(seed)
    for c in seed["spec"]["containers"]:
        c.pop("imagePullPolicy", None)
    return seed


def _seed_job_with_launcher_args(seed_job_raw: dict[str, Any]) -> Any:
    """The seed's resulting launcher was rendered from longer args than its example DGLJob,
    and delivered the parts the original's way (partitionTransfer KubectlCp, which is served
    as HTTP now: see _seed_launcher_over_http)."""
    seed_launcher = load_fixture("seed_launcher.yaml")
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["partitionTransfer"] = "KubectlCp"
    c = raw["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    c["args"] = seed_launcher["spec"]["containers"][0]["args"]
    return parse_job(raw)


def _seed_launcher_over_http(seed: dict[str, Any]) -> dict[str, Any]:
    """The seed's launcher had the partitioner copy the parts into its dataset volume
    (``kubectl cp``, which needs pods/exec): over HTTP the workers pull them, and the
    launcher has no such volume (ours, issue 58)."""
    seed = copy.deepcopy(seed)
    spec = seed["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "dataset-volume"]
    for c in [*spec["containers"], *spec.get("initContainers", [])]:
        mounts = [m for m in c.get("volumeMounts", []) if m["name"] != "dataset-volume"]
        c["volumeMounts"] = mounts
        for e in c.get("env", []):
            if e["name"] == "WATCHERMODE" and c["name"] == "watcher-loop-partitioner":
                e["value"] = "served"  # (Ready, or Succeeded once it served: a re-attach)
    return seed


def test_launcher_matches_seed(seed_job_raw: dict[str, Any]) -> None:
    job = _seed_job_with_launcher_args(seed_job_raw)
    seed = _seed_launcher_over_http(_without_main_pull_policy(load_fixture("seed_launcher.yaml")))
    got = launcher_pod(job, SEED_OPTS)
    assert_matches_seed(seed, got)
    assert [c["name"] for c in got["spec"]["initContainers"]] == [
        "kubectl-download",
        "watcher-loop-partitioner",
        "watcher-loop-worker",
    ]
    env = {e["name"]: e["value"] for e in got["spec"]["containers"][0]["env"]}
    assert env == {
        "DGL_OPERATOR_KUBEXEC_PATH": "/etc/dgl/kubexec.sh",
        "DGL_OPERATOR_HOSTFILE_PATH": "/etc/dgl/hostfile",
        "DGL_OPERATOR_KUBECTL_PATH": "/opt/kube/kubectl",
        "DGL_OPERATOR_ENV": "1",
        "DGL_OPERATOR_JOB_NAME": "dgl-graphsage",  # ours: dglrun reports progress to it
        "DGL_OPERATOR_JOB_UID": "uid-1234",  # ours: its Events name the job by uid ...
        "DGL_OPERATOR_JOB_NAMESPACE": "dgl-operator",  # ... and namespace
        "DGL_OPERATOR_ATTEMPT": "0",  # ours: its report says which attempt's it is
        "DGL_OPERATOR_PARTITION_TRANSFER": "http",  # ours: KubectlCp is served as HTTP
        "DGL_OPERATOR_PARTFILE_PATH": "/etc/dgl/partfile",  # ours: where the partitioner is
    }
    assert got["spec"]["serviceAccountName"] == "dgl-graphsage-launcher"
    for init in got["spec"]["initContainers"][1:]:
        init_env = {e["name"]: e["value"] for e in init["env"]}
        assert init_env["NAMESPACE"] == "dgl-operator"
    workers_watch = got["spec"]["initContainers"][2]["env"]
    assert {"name": "WATCHER_EXPECTED_PODS", "value": "2"} in workers_watch


def test_partitioner_matches_seed(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(seed_job_raw)
    seed = _without_main_pull_policy(load_fixture("seed_partitioner.yaml"))
    got = partitioner_pod(job, SEED_OPTS)
    assert_matches_seed(seed, got)
    main = got["spec"]["containers"][0]
    launcher_main = seed_job_raw["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"
    ][0]
    assert main["command"] == launcher_main["command"]
    assert main["args"] == launcher_main["args"]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env["DGL_OPERATOR_PHASE_ENV"] == "Partitioner"
    assert env["DGL_OPERATOR_ENV"] == "1"
    assert env["DGL_OPERATOR_JOB_NAME"] == "dgl-graphsage"
    assert got["spec"]["serviceAccountName"] == "dgl-graphsage-partitioner"


def test_worker_matches_seed(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    c = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    c["resources"] = {"limits": {"memory": "20G"}}  # the seed's sizeLimit is half of it
    job = parse_job(raw)
    seed = _without_main_pull_policy(load_fixture("seed_worker.yaml"))
    # ours: the worker's main process is the agent (issue 58), not the seed's `sleep 365d`
    for c in seed["spec"]["containers"]:
        assert c.pop("command") == ["sleep"] and c.pop("args") == ["365d"]
    got = worker_pod(job, 0, opts=SEED_OPTS)
    assert_matches_seed(seed, got)
    main = got["spec"]["containers"][0]
    assert main["command"] == [
        "python3", "/opt/dgl-agent/dgl-agent.pyz", "--token-file", "/etc/dgl-transfer/token"
    ]  # fmt: skip
    assert "args" not in main
    assert main["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 30071}
    (install,) = got["spec"]["initContainers"]
    assert install["image"] == SEED_OPTS.watcher_loop_image  # (the operator's image)
    assert install["command"] == ["python3", "-m", "workeragent.install", "/opt/dgl-agent"]
    ports = main["ports"]
    assert [p["containerPort"] for p in ports] == [*range(30050, 30070), 30071]
    assert len({p["name"] for p in ports}) == 21
    assert all(len(p["name"]) <= 15 for p in ports)
    assert {"name": "DGL_OPERATOR_ENV", "value": "1"} in got["spec"]["containers"][0]["env"]


def test_common_pod_metadata(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(seed_job_raw)
    pods = {
        "Launcher": launcher_pod(job, SEED_OPTS, attempt=2),
        "Partitioner": partitioner_pod(job, SEED_OPTS, attempt=2),
        "Worker": worker_pod(job, 1, attempt=2),
    }
    for rtype, pod in pods.items():
        meta = pod["metadata"]
        assert meta["namespace"] == "dgl-operator"
        assert meta["labels"]["dgl-replica-type"] == rtype
        assert meta["labels"]["dgl-replica-name"] == meta["name"]
        assert meta["labels"][JOB_NAME_LABEL] == "dgl-graphsage"
        assert meta["annotations"]["dgl-replica"] == rtype
        assert meta["annotations"][ATTEMPT_ANNOTATION] == "2"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "qihoo.net/v1alpha1",
                "kind": "DGLJob",
                "name": "dgl-graphsage",
                "uid": "uid-1234",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert pod["spec"]["restartPolicy"] == "Never"


def test_template_fields_survive_and_restart_policy_is_forced(
    seed_job_raw: dict[str, Any],
) -> None:
    raw = copy.deepcopy(seed_job_raw)
    tpl = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]
    tpl["metadata"] = {"labels": {"team": "gnn"}, "annotations": {"a": "b"}}
    tpl["spec"]["restartPolicy"] = "Always"
    tpl["spec"]["nodeSelector"] = {"pool": "cpu"}
    tpl["spec"]["containers"][0]["command"] = ["my-entry"]
    tpl["spec"]["containers"][0]["env"] = [{"name": "DGL_OPERATOR_ENV", "value": "0"}]
    job = parse_job(raw)
    pod = worker_pod(job, 0)
    assert pod["metadata"]["labels"]["team"] == "gnn"
    assert pod["metadata"]["annotations"]["a"] == "b"
    assert pod["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert pod["spec"]["restartPolicy"] == "Never"
    main = pod["spec"]["containers"][0]
    # the template's own command runs beside the agent, started by it
    assert main["command"][-2:] == ["--", "my-entry"] and "args" not in main
    assert main["command"][:2] == ["python3", "/opt/dgl-agent/dgl-agent.pyz"]
    assert [e for e in main["env"] if e["name"] == "DGL_OPERATOR_ENV"] == [
        {"name": "DGL_OPERATOR_ENV", "value": "1"}
    ]
    # the job's template itself is untouched (builders are pure)
    assert job.spec.worker is not None
    assert job.spec.worker.template["spec"]["restartPolicy"] == "Always"


def test_init_container_images_come_from_options(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(seed_job_raw)
    opts = BuildOptions(
        kubectl_download_image="reg.local/kd:1",
        watcher_loop_image="reg.local/wl:2",
        init_image_pull_policy="Never",
        kubectl_download_url="http://mirror.local/kubectl",
        kubectl_download_sha256="ab" * 32,
    )
    pod = launcher_pod(job, opts)
    images = [c["image"] for c in pod["spec"]["initContainers"]]
    assert images == ["reg.local/kd:1", "reg.local/wl:2", "reg.local/wl:2"]
    assert {c["imagePullPolicy"] for c in pod["spec"]["initContainers"]} == {"Never"}
    kd_env = {e["name"]: e["value"] for e in pod["spec"]["initContainers"][0]["env"]}
    assert kd_env["KUBECTL_URL"] == "http://mirror.local/kubectl"
    assert kd_env["KUBECTL_SHA256"] == "ab" * 32
    assert partitioner_pod(job, opts)["spec"]["initContainers"][0]["image"] == "reg.local/kd:1"


def _pod(name: str, ip: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"podIP": ip} if ip else {}}


def test_config_map_formats(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["slotsPerWorker"] = 2
    job = parse_job(raw)
    pods = {
        "dgl-graphsage-worker-0": _pod("dgl-graphsage-worker-0", "10.0.0.5"),
        "dgl-graphsage-worker-1": _pod("dgl-graphsage-worker-1", "10.0.0.6"),
        "dgl-graphsage-partitioner": _pod("dgl-graphsage-partitioner", "10.0.0.7"),
        "dgl-graphsage-launcher": _pod("dgl-graphsage-launcher", "10.0.0.8"),
    }
    cm = config_map(job, pods)
    assert cm["metadata"]["name"] == "dgl-graphsage-config"
    assert cm["metadata"]["labels"]["app"] == "dgl-graphsage"
    assert cm["data"] == {
        "kubexec.sh": KUBEXEC_SCRIPT,
        "hostfile": "10.0.0.5 30050 dgl-graphsage-worker-0 slots=2\n"
        "10.0.0.6 30050 dgl-graphsage-worker-1 slots=2\n",
        "partfile": "10.0.0.7 30050 dgl-graphsage-partitioner\n",
        "leadfile": "10.0.0.8 30050 dgl-graphsage-launcher\n",
        # ours: mpirun's remote shell through the workers' agents
        "agent-rsh": '#!/bin/sh\nexec python3 -P -m workeragent.rsh "$@"\n',
    }
    assert KUBEXEC_SCRIPT.splitlines() == [
        "#!/bin/sh",
        "set -x",
        "POD_NAME=$1",
        "shift",
        '/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"',
    ]


def test_hostfile_numeric_order_and_no_line_without_ip(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = 12
    job = parse_job(raw)
    # dict order deliberately scrambled, worker 3 has no IP yet
    pods = {
        f"dgl-graphsage-worker-{i}": _pod(
            f"dgl-graphsage-worker-{i}", None if i == 3 else f"10.1.0.{i}"
        )
        for i in (11, 2, 10, 0, 1, 3, 9, 8, 7, 6, 5, 4)
    }
    lines = hostfile(job, pods).splitlines()
    assert [ln.split()[2] for ln in lines] == [
        f"dgl-graphsage-worker-{i}" for i in range(12) if i != 3
    ]
    assert all(ln.split()[0] == f"10.1.0.{ln.split()[2].rsplit('-', 1)[1]}" for ln in lines)
    assert config_map(job, {})["data"]["hostfile"] == ""
    assert config_map(job, {})["data"]["partfile"] == ""


def test_rbac_limits_exec_to_the_jobs_pods(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["partitionTransfer"] = "KubectlCp"  # (served as HTTP: no exec either)
    job = parse_job(raw)
    objs = rbac(job)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds == [
        ("ServiceAccount", "dgl-graphsage-launcher"),
        ("Role", "dgl-graphsage-launcher"),
        ("RoleBinding", "dgl-graphsage-launcher"),
        ("ServiceAccount", "dgl-graphsage-partitioner"),
        ("Role", "dgl-graphsage-partitioner"),
        ("RoleBinding", "dgl-graphsage-partitioner"),
    ]
    launcher_role, partitioner_role = objs[1], objs[4]
    workers = ["dgl-graphsage-worker-0", "dgl-graphsage-worker-1"]
    # before issue 57 each also held: pods get/list/watch on every pod of the namespace,
    # dgljobs/status get+patch (a pod could write its job's status) and events create;
    # before issue 58, pods/exec on the workers (the launcher) and on the launcher (the
    # partitioner, KubectlCp)
    assert launcher_role["rules"] == [
        _rule("pods", [*workers, "dgl-graphsage-partitioner"], "get", "list", "watch"),
        _rule("dgljobs/status", ["dgl-graphsage"], "get", group="qihoo.net"),
        _rule("configmaps", ["dgl-graphsage-report"], "get", "patch"),
    ]
    assert partitioner_role["rules"] == [
        _rule("dgljobs/status", ["dgl-graphsage"], "get", group="qihoo.net"),
        _rule("configmaps", ["dgl-graphsage-report"], "get", "patch"),
    ]
    for role in (launcher_role, partitioner_role):
        assert all(r.get("resourceNames") for r in role["rules"]), "a rule on every object"
        assert not any("patch" in r["verbs"] for r in role["rules"] if "dgljobs" in str(r))
    binding = objs[2]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "dgl-graphsage-launcher",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dgl-graphsage-launcher", "namespace": "dgl-operator"}
    ]


def test_over_http_the_partitioner_execs_into_nothing(seed_job_raw: dict[str, Any]) -> None:
    partitioner_role = rbac(parse_job(seed_job_raw))[4]
    resources = [r["resources"] for r in partitioner_role["rules"]]
    assert resources == [["dgljobs/status"], ["configmaps"]]
    assert all(r.get("resourceNames") for r in partitioner_role["rules"])


def _rule(resource: str, names: list[str], *verbs: str, group: str = "") -> dict[str, Any]:
    return {"apiGroups": [group], "resources": [resource], "resourceNames": names,
            "verbs": list(verbs)}  # fmt: skip


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def _mounts(pod: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0]["volumeMounts"]}


def test_every_pod_of_a_job_takes_connections_from_its_own_pods_only(
    seed_job_raw: dict[str, Any],
) -> None:
    """One NetworkPolicy selects all the job's pods, by the label the operator sets (a
    template's cannot override it), and admits only pods of that label, in the namespace."""
    job = parse_job(seed_job_raw)
    want = desired(job, SEED_OPTS)
    (policy,) = want.network
    assert policy["metadata"]["name"] == "dgl-graphsage-pods"
    assert policy["metadata"]["ownerReferences"][0]["uid"] == job.uid
    own = {"matchLabels": {JOB_NAME_LABEL: "dgl-graphsage"}}
    assert policy["spec"] == {
        "podSelector": own,
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": own}]}],
    }
    assert want.partitioner is not None
    pods = [*want.workers, want.partitioner, want.launcher]
    assert all(p["metadata"]["labels"][JOB_NAME_LABEL] == "dgl-graphsage" for p in pods)
    assert want.once.index(policy) < len(want.once)  # created once, before any pod
    assert desired(job, replace(SEED_OPTS, network_policy=False)).network == []


def test_http_transfer_children(seed_job_raw: dict[str, Any]) -> None:
    """The default: a token Secret, the partitioner serving on 30070 and Ready once it
    serves, the launcher waiting for that, every pod with the token."""
    job = parse_job(seed_job_raw)
    want = desired(job, SEED_OPTS, token="t0ken")
    (secret,) = want.transfer
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "dgl-graphsage-transfer"
    assert base64.b64decode(secret["data"]["token"]) == b"t0ken"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == job.uid
    assert len(desired(job, SEED_OPTS).transfer[0]["data"]["token"]) == 88  # 64 hex, base64
    part = want.partitioner
    assert part is not None
    main = part["spec"]["containers"][0]
    assert {"name": "partitions", "containerPort": 30070, "protocol": "TCP"} in main["ports"]
    assert main["readinessProbe"]["httpGet"] == {"path": "/ready", "port": 30070}
    assert _env(main)["DGL_OPERATOR_PARTITION_TRANSFER"] == "http"
    assert _env(main)["DGL_OPERATOR_PARTFILE_PATH"] == "/etc/dgl/partfile"
    launcher = want.launcher
    lmain = launcher["spec"]["containers"][0]
    assert _env(lmain)["DGL_OPERATOR_PARTITION_TRANSFER"] == "http"
    assert _env(lmain)["DGL_OPERATOR_PARTFILE_PATH"] == "/etc/dgl/partfile"
    watcher = launcher["spec"]["initContainers"][1]
    assert watcher["name"] == "watcher-loop-partitioner"
    assert _env(watcher)["WATCHERMODE"] == "served"  # serving (or served), not copied
    assert "dataset-volume" not in {v["name"] for v in launcher["spec"]["volumes"]}
    for pod in (part, launcher, *want.workers):
        assert _mounts(pod)["/etc/dgl-transfer"] == "transfer-token", pod["metadata"]["name"]
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "transfer-token")
        assert volume["secret"]["secretName"] == "dgl-graphsage-transfer"


def test_a_kubectl_cp_manifest_is_served_over_http(seed_job_raw: dict[str, Any]) -> None:
    """The original's KubectlCp needs pods/exec, which no pod of a job holds: its manifest
    gets HTTP's children (a twin: the same job asking HTTP), so nothing grants exec."""
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["partitionTransfer"] = "KubectlCp"
    kubectl_cp = desired(transfer.chosen(parse_job(raw)), SEED_OPTS)
    raw["spec"]["partitionTransfer"] = "HTTP"
    http = desired(transfer.chosen(parse_job(raw)), SEED_OPTS)
    assert kubectl_cp.partitioner is not None
    assert "readinessProbe" in kubectl_cp.partitioner["spec"]["containers"][0]
    watcher = kubectl_cp.launcher["spec"]["initContainers"][1]
    assert _env(watcher)["WATCHERMODE"] == "served"
    assert "/dgl_workspace/dataset" not in _mounts(kubectl_cp.launcher)
    assert len(kubectl_cp.transfer) == len(http.transfer) == 1
    assert kubectl_cp.rbac == http.rbac
    assert "pods/exec" not in str(kubectl_cp.rbac)


def test_the_operators_labels_win_over_a_templates(seed_job_raw: dict[str, Any]) -> None:
    """A template that names another job (or another replica) cannot put its pods in that
    job's Service or among its replicas: the operator's labels are set last."""
    raw = copy.deepcopy(seed_job_raw)
    for rtype in ("Worker", "Launcher"):
        tpl = raw["spec"]["dglReplicaSpecs"][rtype]["template"]
        tpl["metadata"] = {
            "labels": {
                JOB_NAME_LABEL: "someone-elses-job",
                "dgl-replica-type": "Worker",
                "dgl-replica-name": "someone-elses-job-worker-0",
                "team": "gnn",
            }
        }
    job = parse_job(raw)
    want = desired(job, BuildOptions())
    assert want.partitioner is not None
    for pod in (*want.workers, want.partitioner, want.launcher):
        labels = pod["metadata"]["labels"]
        assert labels[JOB_NAME_LABEL] == "dgl-graphsage", labels
        assert labels["dgl-replica-name"] == pod["metadata"]["name"], labels
        assert labels["team"] == "gnn"
    assert want.launcher["metadata"]["labels"]["dgl-replica-type"] == "Launcher"


def test_one_headless_service_names_every_worker(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(seed_job_raw)
    want = desired(job, BuildOptions())
    [svc] = want.services
    assert svc == worker_service(job)
    assert svc["metadata"]["name"] == "dgl-graphsage-worker"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    # every worker, not the partitioner or the launcher (same job label, other types)
    selector = svc["spec"]["selector"]
    assert selector == {"dgl.qihoo.net/job-name": "dgl-graphsage", "dgl-replica-type": "Worker"}
    assert want.partitioner is not None  # the seed job partitions
    for pod in (*want.workers, want.partitioner, want.launcher):
        labels = pod["metadata"]["labels"]
        chosen = all(labels.get(k) == v for k, v in selector.items())
        assert chosen == (pod in want.workers), pod["metadata"]["name"]
    assert [p["port"] for p in svc["spec"]["ports"]] == list(range(30050, 30070))
    # worker i is dgl-graphsage-worker-i.dgl-graphsage-worker in DNS
    assert [w["spec"]["subdomain"] for w in want.workers] == ["dgl-graphsage-worker"] * 2
    assert all(w["spec"]["hostname"] == w["metadata"]["name"] for w in want.workers)


def test_a_worker_template_keeps_its_own_subdomain(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["subdomain"] = "mine"
    want = desired(parse_job(raw), BuildOptions())
    assert {w["spec"]["subdomain"] for w in want.workers} == {"mine"}


def test_skip_mode_is_launcher_only(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["partitionMode"] = "Skip"
    del raw["spec"]["dglReplicaSpecs"]["Worker"]
    job = parse_job(raw)
    d = desired(job, BuildOptions())
    assert d.config_map is None and d.rbac == [] and d.workers == [] and d.partitioner is None
    pod = d.launcher
    main = pod["spec"]["containers"][0]
    assert main["env"] == [{"name": "DGL_OPERATOR_PHASE_ENV", "value": "Launcher_Workload"}]
    assert "initContainers" not in pod["spec"]
    assert "serviceAccountName" not in pod["spec"]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [("2Gi", "1Gi"), ("1G", "500000000"), ("3Gi", "1536Mi"), ("1500Mi", "750Mi"), (None, None)],
)
def test_shm_is_half_the_memory_limit(limit: str | None, expected: str | None) -> None:
    container: dict[str, Any] = {"name": "c"}
    if limit:
        container["resources"] = {"limits": {"memory": limit}}
    assert shm_size_limit(container) == expected


def test_shm_without_limit_has_no_size_limit(seed_job_raw: dict[str, Any]) -> None:
    pod = worker_pod(parse_job(seed_job_raw), 0)
    shm = next(v for v in pod["spec"]["volumes"] if v["name"] == "shm-volume")
    assert shm["emptyDir"] == {"medium": "Memory"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512Mi", 512 * 2**20),
        ("1.5Gi", 3 * 2**29),
        ("2G", 2 * 10**9),
        ("100m", 0.1),
        ("1e3", 1000),
        (7, 7),
        ("6k", 6000),  # Kubernetes: lowercase k is 1000
        ("6Ki", 6144),
    ],
)
def test_parse_quantity(text: Any, value: float) -> None:
    assert float(parse_quantity(text)) == pytest.approx(value)


def test_parse_quantity_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity("12 apples")


def test_parse_quantity_refuses_an_uppercase_k_as_kubernetes_does() -> None:
    with pytest.raises(ValueError, match=r"invalid quantity '6K' \(K is not a suffix: k is 1000"):
        parse_quantity("6K")


def test_format_bytes() -> None:
    assert format_bytes(2**30) == "1Gi"
    assert format_bytes(3 * 2**19) == "1536Ki"
    assert format_bytes(1000) == "1000"


# -- spec.storage ---------------------------------------------------------------------------

CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def _with_storage(raw: dict[str, Any], **storage: Any) -> Any:
    raw = copy.deepcopy(raw)
    raw["spec"]["storage"] = storage
    raw["metadata"]["uid"] = "0123abcd-ffff"
    return parse_job(raw)


@pytest.mark.parametrize(("policy", "owned"), [(None, False), ("Retain", False), ("Delete", True)])
def test_a_claim_from_the_template_outlives_the_job_unless_it_owns_it(
    seed_job_raw: dict[str, Any], policy: str | None, owned: bool
) -> None:
    storage: dict[str, Any] = {"claimTemplate": {"metadata": {"labels": {"team": "g"}},
                                                 "spec": CLAIM_SPEC}}  # fmt: skip
    if policy:
        storage["claimPolicy"] = policy
    job = _with_storage(seed_job_raw, **storage)
    claim = desired(job, SEED_OPTS).claim
    assert claim is not None and claim["kind"] == "PersistentVolumeClaim"
    meta = claim["metadata"]
    assert meta["name"] == "dgl-graphsage-results" and claim["spec"] == CLAIM_SPEC
    assert meta["labels"] == {"team": "g", JOB_NAME_LABEL: "dgl-graphsage"}
    assert ("ownerReferences" in meta) is owned
    assert meta["annotations"]["dgl.qihoo.net/claim-policy"] == (policy or "Retain")


def test_every_pod_mounts_the_storage_and_dglrun_knows_where(
    seed_job_raw: dict[str, Any],
) -> None:
    job = _with_storage(seed_job_raw, claimName="results", path="team/g", sharePartitions=True)
    want = desired(job, SEED_OPTS)
    assert want.claim is None  # the user's claim: never made, modified or deleted
    assert want.partitioner is not None
    for pod in [want.launcher, want.partitioner, *want.workers]:
        main = pod["spec"]["containers"][0]
        assert {"name": "dgl-storage", "mountPath": "/dgl_storage"} in main["volumeMounts"]
        assert {"name": "dgl-storage", "persistentVolumeClaim": {"claimName": "results"}} in (
            pod["spec"]["volumes"]
        )
    for pod in (want.launcher, want.partitioner):
        env = _env(pod["spec"]["containers"][0])
        assert env["DGL_OPERATOR_STORAGE"] == "/dgl_storage/team/g"
        assert env["DGL_OPERATOR_RUN_NAME"] == "dgl-graphsage-0123abcd"
        assert env["DGL_OPERATOR_SHARE_PARTITIONS"] == "true"
        assert "DGL_OPERATOR_CACHE_LIMIT" not in env  # (dglrun's default then)
    from controller.features.storage import results_location

    assert results_location(job) == "results:/team/g/runs/dgl-graphsage-0123abcd/output"
    plain = desired(parse_job(seed_job_raw), SEED_OPTS)
    assert plain.claim is None and "DGL_OPERATOR_STORAGE" not in _env(
        plain.launcher["spec"]["containers"][0]
    )


def test_the_templates_own_init_containers_see_the_storage_the_operators_do_not(
    seed_job_raw: dict[str, Any],
) -> None:
    """A Worker's init container that generates its chunks once onto the claim (and finds them
    there at the next attempt) mounts it; the operator's own init containers never do."""
    raw = copy.deepcopy(seed_job_raw)
    init = {"name": "generate", "image": "g", "command": ["true"]}
    for replica in ("Worker", "Launcher"):
        raw["spec"]["dglReplicaSpecs"][replica]["template"]["spec"]["initContainers"] = [
            copy.deepcopy(init)
        ]
    want = desired(_with_storage(raw, claimName="results"), SEED_OPTS)
    mount = {"name": "dgl-storage", "mountPath": "/dgl_storage"}
    assert want.partitioner is not None
    for pod in [want.launcher, want.partitioner, *want.workers]:
        for c in pod["spec"]["initContainers"]:
            assert (mount in (c.get("volumeMounts") or [])) == (c["name"] == "generate"), c["name"]


def test_the_cache_limit_reaches_dglrun_as_written(seed_job_raw: dict[str, Any]) -> None:
    job = _with_storage(seed_job_raw, claimName="results", cacheLimit="20Gi")
    want = desired(job, SEED_OPTS)
    assert want.partitioner is not None
    for pod in (want.launcher, want.partitioner):
        env = _env(pod["spec"]["containers"][0])
        assert env["DGL_OPERATOR_CACHE_LIMIT"] == "20Gi"
        assert "DGL_OPERATOR_SHARE_PARTITIONS" not in env
    for pod in want.workers:  # (dglrun runs in the launcher and the partitioner only)
        assert "DGL_OPERATOR_CACHE_LIMIT" not in _env(pod["spec"]["containers"][0])


def test_skip_mode_keeps_its_results_on_the_storage_too(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["partitionMode"] = "Skip"
    del raw["spec"]["dglReplicaSpecs"]["Worker"]
    job = _with_storage(raw, claimTemplate={"spec": CLAIM_SPEC})
    want = desired(job, SEED_OPTS)
    main = want.launcher["spec"]["containers"][0]
    assert _env(main)["DGL_OPERATOR_STORAGE"] == "/dgl_storage"
    assert {"name": "dgl-storage", "mountPath": "/dgl_storage"} in main["volumeMounts"]
    assert want.claim is not None


def test_out_of_core_reaches_dglrun_in_the_launcher_and_the_partitioner(
    seed_job_raw: dict[str, Any],
) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["outOfCore"] = {"enabled": True, "pageCacheFraction": 0.25, "order": "Buffer"}
    job = parse_job(raw)
    assert job.spec.out_of_core is not None and job.spec.out_of_core.page_cache_fraction == 0.25
    assert job.spec.out_of_core.order == "Buffer"
    want = desired(job, SEED_OPTS)
    assert want.partitioner is not None
    for pod in (want.launcher, want.partitioner):
        env = _env(pod["spec"]["containers"][0])
        assert env["DGL_OPERATOR_OUT_OF_CORE"] == "true"
        assert env["DGL_OPERATOR_PAGE_CACHE_FRACTION"] == "0.25"
        assert env["DGL_OPERATOR_OUT_OF_CORE_ORDER"] == "Buffer"
    raw["spec"]["outOfCore"] = {"enabled": True}  # the order's default: Exact, said as such
    exact = desired(parse_job(raw), SEED_OPTS).launcher["spec"]["containers"][0]
    assert _env(exact)["DGL_OPERATOR_OUT_OF_CORE_ORDER"] == "Exact"
    # off (or absent): nothing set, dglrun trains in memory
    raw["spec"]["outOfCore"] = {"enabled": False}
    assert parse_job(raw).spec.out_of_core is None
    plain = desired(parse_job(seed_job_raw), SEED_OPTS)
    assert "DGL_OPERATOR_OUT_OF_CORE" not in _env(plain.launcher["spec"]["containers"][0])


def test_the_order_of_dglruns_env_is_the_operators_then_each_features_at_its_place() -> None:
    """The env of the pods that run dglrun, in order: the paths and the job, the memory limit,
    the features' settings of the job (the storage's, then the elastic rule), out of core, the
    pod's own (the partitioner's leadfile and phase), then the delivery's (the transfer's). The
    order is part of the pods the operator builds: a change of it changes every pod."""
    raw = copy.deepcopy(load_fixture("seed_dgljob.yaml"))
    raw["metadata"]["uid"] = "0123abcd-0000"
    raw["spec"].update(
        partitionTransfer="HTTP",
        outOfCore={"enabled": True, "pageCacheFraction": 0.3},
        storage={"claimName": "c", "sharePartitions": True, "cacheLimit": "2Gi"},
        elasticPolicy={"minReplicas": 1, "maxReplicas": 2},
    )
    worker = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker.setdefault("resources", {}).setdefault("limits", {})["memory"] = "4Gi"
    d = desired(parse_job(raw), BuildOptions(), token="t")
    job = [
        "KUBEXEC_PATH",
        "HOSTFILE_PATH",
        "KUBECTL_PATH",
        "ENV",
        "JOB_NAME",
        "JOB_UID",
        "JOB_NAMESPACE",
        "WORKER_MEMORY_LIMIT",
        "STORAGE",
        "RUN_NAME",
        "SHARE_PARTITIONS",
        "CACHE_LIMIT",
        "ELASTIC",
        "PARTITION_COUNTS",
        "OUT_OF_CORE",
        "PAGE_CACHE_FRACTION",
        "OUT_OF_CORE_ORDER",
    ]
    delivery = ["PARTITION_TRANSFER", "PARTFILE_PATH"]
    want = {
        "partitioner": [*job, "LEADFILE_PATH", "PHASE_ENV", "ATTEMPT", *delivery],
        "launcher": [*job, "ATTEMPT", *delivery],
    }
    for role, pod in (("partitioner", d.partitioner), ("launcher", d.launcher)):
        assert pod is not None
        names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
        assert names == [f"DGL_OPERATOR_{n}" for n in want[role]], role
