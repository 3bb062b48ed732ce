"""Desired children of a DGLJob, as pure functions of the job (and observed pod IPs).

Every pod field the operator sets is set here, in exactly one builder. The formats (ConfigMap
keys, env vars, mounts, names) are those of the original Go operator, so that manifests and
images written for it keep working; their names are the pod contract's (podcontract), which the
programs in the pods read.
"""

from __future__ import annotations

import base64
import copy
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

import podcontract as pc
from controller.api import (
    API_VERSION,
    CLAIM_DELETE,
    GROUP,
    KIND,
    LAUNCHER,
    PARTITIONER,
    PROBE,
    TRANSFER_HTTP,
    TRANSFER_KUBECTL,
    WORKER,
    DGLJob,
)
from dgljob.names import JOB_NAME_LABEL as JOB_NAME_LABEL  # (re-exported: the children use it)
from kubeclient import PODGROUPS, Obj
from podcontract import settings as dglrun
from podcontract.quantity import format_bytes, parse_quantity
from podcontract.settings import env_pairs

# Labels and annotations (the first three are the original operator's; the job-name label is
# dgljob.names.JOB_NAME_LABEL).
REPLICA_NAME_LABEL = "dgl-replica-name"
REPLICA_TYPE_LABEL = "dgl-replica-type"
REPLICA_ANNOTATION = "dgl-replica"
ATTEMPT_ANNOTATION = "dgl.qihoo.net/restart-attempt"

# The paths, env and ports of the pod contract are podcontract's; how spec fields map to them:
DGLRUN_TRANSFER = {TRANSFER_HTTP: pc.TRANSFER_HTTP, TRANSFER_KUBECTL: pc.TRANSFER_KUBECTL}

# spec.storage: one claim, mounted in every pod of the job at pc.STORAGE_DIR
STORAGE_VOLUME = "dgl-storage"
CLAIM_POLICY_ANNOTATION = "dgl.qihoo.net/claim-policy"

KUBE_VOLUME = "kube-volume"
CONFIG_VOLUME = "config-volume"
DATASET_VOLUME = "dataset-volume"
SHM_VOLUME = "shm-volume"
TRANSFER_VOLUME = "transfer-token"
# on every pod that mounts the transfer token: its Secret's name (controller/transfer.py)
TRANSFER_SECRET_ANNOTATION = "dgl.qihoo.net/transfer-secret"

# Gang scheduling (--gang-scheduling): the scheduler that places a job's pods all or none
GANG_NONE = "none"
# scheduler-plugins' Coscheduling: a PodGroup per job, its pods labelled with the group's name
GANG_SCHEDULER_PLUGINS = "scheduler-plugins"
GANG_SCHEDULERS = (GANG_NONE, GANG_SCHEDULER_PLUGINS)
# the schedulerName of scheduler-plugins' scheduler installed as a second scheduler
DEFAULT_GANG_SCHEDULER_NAME = "scheduler-plugins-scheduler"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

# Placement: the workers spread over the nodes, softly (see worker_pod)
HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"

MODE_EXEC = 0o555  # 365
MODE_READ = 0o444  # 292

KUBEXEC_SCRIPT = (
    "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n"
    f'{pc.KUBECTL_PATH} exec ${{POD_NAME}} -- /bin/sh -c "$*"\n'
)


@dataclass(frozen=True)
class BuildOptions:
    """Operator-level settings that shape the children (from the CLI flags)."""

    kubectl_download_image: str = "dgloperator/kubectl-download:0.2.0"
    watcher_loop_image: str = "dgloperator/watcher-loop:0.2.0"
    init_image_pull_policy: str = "IfNotPresent"
    kubectl_download_url: str = ""
    kubectl_download_sha256: str = ""
    gang_scheduling: str = GANG_NONE
    gang_scheduler_name: str = DEFAULT_GANG_SCHEDULER_NAME
    # --kueue: a job labelled kueue.x-k8s.io/queue-name runs only once Kueue admits its
    # Workload (controller/kueue.py)
    kueue: bool = False
    # --network-policy (the chart's networkPolicy.enabled): each job gets network_policy()
    network_policy: bool = True

    def __post_init__(self) -> None:
        if self.gang_scheduling not in GANG_SCHEDULERS:
            raise ValueError(
                f"gang scheduling {self.gang_scheduling!r}: not one of {', '.join(GANG_SCHEDULERS)}"
            )

    @property
    def gang(self) -> bool:
        """Pods are placed by a gang scheduler, through a PodGroup per job."""
        return self.gang_scheduling != GANG_NONE


# -- shared pieces --------------------------------------------------------------------------


def owner_reference(job: DGLJob) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _meta(job: DGLJob, name: str, labels: Mapping[str, str] | None = None) -> Obj:
    """A child's metadata: ``labels`` (a template's), with the operator's own winning (a
    template that names another job cannot put its pods in that job's Service)."""
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": {**(labels or {}), JOB_NAME_LABEL: job.name},
        "ownerReferences": [owner_reference(job)],
    }


def _env(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def _set_env(container: Obj, *pairs: tuple[str, str]) -> None:
    """Set env vars on a container, replacing same-named entries the user gave."""
    env = [e for e in container.get("env") or [] if e.get("name") not in {n for n, _ in pairs}]
    container["env"] = env + [_env(n, v) for n, v in pairs]


def _add_mounts(container: Obj, *mounts: tuple[str, str]) -> None:
    existing = container.get("volumeMounts") or []
    taken = {m.get("mountPath") for m in existing}
    container["volumeMounts"] = existing + [
        {"name": n, "mountPath": p} for n, p in mounts if p not in taken
    ]


def _add_volumes(spec: Obj, *volumes: Obj) -> None:
    existing = spec.get("volumes") or []
    taken = {v.get("name") for v in existing}
    spec["volumes"] = existing + [v for v in volumes if v["name"] not in taken]


def _config_volume(job: DGLJob, keys: tuple[tuple[str, int], ...]) -> Obj:
    return {
        "name": CONFIG_VOLUME,
        "configMap": {
            "name": job.config_name,
            "items": [{"key": k, "path": k, "mode": mode} for k, mode in keys],
        },
    }


ALL_CONFIG_KEYS = (
    (pc.KUBEXEC_KEY, MODE_EXEC),
    (pc.HOSTFILE_KEY, MODE_READ),
    (pc.PARTFILE_KEY, MODE_READ),
    (pc.LEADFILE_KEY, MODE_READ),
)
LAUNCHER_CONFIG_KEYS = ALL_CONFIG_KEYS[:3]  # the seed's launcher mounts no leadfile


def _base_pod(job: DGLJob, template: Obj, name: str, replica_type: str, attempt: int) -> Obj:
    tpl = copy.deepcopy(template)
    tmeta = tpl.get("metadata") or {}
    meta = _meta(
        job,
        name,
        {**(tmeta.get("labels") or {}), REPLICA_NAME_LABEL: name, REPLICA_TYPE_LABEL: replica_type},
    )
    meta["annotations"] = {
        **(tmeta.get("annotations") or {}),
        REPLICA_ANNOTATION: replica_type,
        ATTEMPT_ANNOTATION: str(attempt),
    }
    spec = tpl.get("spec") or {}
    spec["restartPolicy"] = "Never"
    priority = job.spec.run_policy.scheduling_policy.priority_class
    if priority and not spec.get("priorityClassName"):
        spec["priorityClassName"] = priority
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    placed = job.spec.placement.get(replica_type)
    if placed is not None:  # a queued job's admission (controller/kueue.py)
        placed.apply(pod)
    return pod


def _main(pod: Obj) -> Obj:
    container: Obj = pod["spec"]["containers"][0]
    return container


# The operator's own containers (its init containers, the elastic probe's) run in the users'
# namespaces whatever their templates say: Pod Security "restricted" admits them (non-root as
# the images' nonroot user, no privilege escalation, no capabilities, RuntimeDefault seccomp),
# and so does a ResourceQuota that requires requests and limits (a Python program that
# watches a few pods or copies kubectl: tens of MiB).
NONROOT_UID = 65532  # the images' user (images/Dockerfile)
OWN_SECURITY_CONTEXT: Obj = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": NONROOT_UID,
    "runAsGroup": NONROOT_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
OWN_RESOURCES: Obj = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "1", "memory": "256Mi"},
}


def _own(container: Obj) -> Obj:
    """One of the operator's own containers, with its restricted context and resources."""
    return {
        **container,
        "securityContext": copy.deepcopy(OWN_SECURITY_CONTEXT),
        "resources": copy.deepcopy(OWN_RESOURCES),
    }


def _kubectl_download(opts: BuildOptions) -> Obj:
    c: Obj = {
        "name": "kubectl-download",
        "image": opts.kubectl_download_image,
        "imagePullPolicy": opts.init_image_pull_policy,
        "volumeMounts": [{"name": KUBE_VOLUME, "mountPath": pc.KUBE_DIR}],
    }
    env = [(pc.KUBECTL_TARGET_DIR_ENV, pc.KUBE_DIR)]
    if opts.kubectl_download_url:
        env.append((pc.KUBECTL_URL_ENV, opts.kubectl_download_url))
    if opts.kubectl_download_sha256:
        env.append((pc.KUBECTL_SHA256_ENV, opts.kubectl_download_sha256))
    c["env"] = [_env(k, v) for k, v in env]
    return _own(c)


def _watcher_loop(
    job: DGLJob,
    opts: BuildOptions,
    name: str,
    file: str,
    mode: str,
    expected: int,
    mounts: list[Obj],
) -> Obj:
    return _own(
        {
            "name": name,
            "image": opts.watcher_loop_image,
            "imagePullPolicy": opts.init_image_pull_policy,
            "env": [
                _env(pc.WATCHER_FILE_ENV, file),
                _env(pc.WATCHER_MODE_ENV, mode),
                _env(pc.WATCHER_NAMESPACE_ENV, job.namespace),
                _env(pc.WATCHER_EXPECTED_PODS_ENV, str(expected)),
            ],
            "volumeMounts": mounts,
        }
    )


def memory_limit(container: Obj) -> int | None:
    """The container's memory limit in bytes, or None without one (or an invalid one: the
    API server rejects such a pod; do not mask its message)."""
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit is None:
        return None
    try:
        return int(parse_quantity(limit))
    except ValueError:
        return None


def shm_size_limit(container: Obj) -> str | None:
    """Half the container's memory limit (bytes, exact), or None without a limit."""
    total = memory_limit(container)
    return format_bytes(total // 2) if total is not None and total > 1 else None


# -- ConfigMap and RBAC ---------------------------------------------------------------------


def _ip(pod: Obj | None) -> str:
    if not pod:
        return ""
    return str((pod.get("status") or {}).get("podIP") or "")


def hostfile(job: DGLJob, pods: Mapping[str, Obj]) -> str:
    """One line per worker of the attempt with an IP, in numeric worker order."""
    lines = []
    for name in job.training_worker_names():
        ip = _ip(pods.get(name))
        if ip:
            lines.append(f"{ip} {pc.DGL_PORT} {name} slots={job.spec.slots_per_worker}\n")
    return "".join(lines)


def _single_line(pod_name: str, pods: Mapping[str, Obj]) -> str:
    ip = _ip(pods.get(pod_name))
    return f"{ip} {pc.DGL_PORT} {pod_name}\n" if ip else ""


def config_map(job: DGLJob, pods: Mapping[str, Obj]) -> Obj:
    """``<job>-config`` with kubexec.sh, hostfile, partfile and leadfile."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(job, job.config_name, {"app": job.name}),
        "data": {
            pc.KUBEXEC_KEY: KUBEXEC_SCRIPT,
            pc.HOSTFILE_KEY: hostfile(job, pods),
            pc.PARTFILE_KEY: _single_line(job.partitioner_name, pods),
            pc.LEADFILE_KEY: _single_line(job.launcher_name, pods),
        },
    }


def service_account(job: DGLJob, name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(job, name),
    }


def role(job: DGLJob, name: str, exec_targets: list[str]) -> Obj:
    rules: list[Obj] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ]
    if exec_targets:  # (empty resourceNames would mean every pod)
        rules.append(
            {
                "apiGroups": [""],
                "resources": ["pods/exec"],
                "resourceNames": exec_targets,
                "verbs": ["create", "get"],
            }
        )
    # dglrun's progress (`kubectl patch --subresource=status`, which reads the object first),
    # on this job only; and its Events (partitions reused, a checkpoint resumed from)
    rules.append(
        {
            "apiGroups": [GROUP],
            "resources": ["dgljobs/status"],
            "resourceNames": [job.name],
            "verbs": ["get", "patch"],
        }
    )
    rules.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]})
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(job, name),
        "rules": rules,
    }


def role_binding(job: DGLJob, name: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(job, name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": job.namespace}],
    }


def rbac(job: DGLJob) -> list[Obj]:
    """ServiceAccount, Role and RoleBinding for the launcher (exec into this job's workers:
    dglrun's commands, and in DistParMETIS mpirun's daemons through kubexec.sh) and, in the
    modes that have one, the partitioner (exec into this job's launcher with KubectlCp)."""
    # made once for the job's life: every worker any attempt may have, not this one's
    accounts = [(job.launcher_name, job.every_worker_name())]
    if job.spec.mode.partitioner:
        # over HTTP the partitioner only serves: it execs into nothing
        targets = [] if job.spec.pulls_partitions else [job.launcher_name]
        accounts.append((job.partitioner_name, targets))
    out: list[Obj] = []
    for name, targets in accounts:
        out += [service_account(job, name), role(job, name, targets), role_binding(job, name)]
    return out


# -- the partition transfer (spec.partitionTransfer HTTP) -----------------------------------


def transfer_secret_name(job: DGLJob) -> str:
    """The token Secret's name: the one controller/transfer.py chose for the job, or the
    name of the operators before it (``<job>-transfer``) for a job they made."""
    return job.transfer_secret or f"{job.name}-transfer"


def transfer_secret(job: DGLJob, token: str) -> Obj:
    """The token the partitioner's server asks of every request."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(job, transfer_secret_name(job)),
        "type": "Opaque",
        "data": {pc.TRANSFER_TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def network_policy(job: DGLJob) -> Obj:
    """``<job>-pods``: every pod of the job (partitioner, workers, launcher, the elastic
    probe) takes connections from this job's own pods only, in its namespace; none from any
    other pod or namespace (where the network plugin enforces NetworkPolicy: the chart's
    ``networkPolicy.enabled``, docs/operations.md). Any port of the job's own: DGL's clients,
    torch's gloo pairs and Open MPI's daemons listen on ports the kernel picks, beside the
    fixed ones (DGL servers pc.DGL_PORT.., the partition server pc.TRANSFER_PORT). What is
    not a pod is not named: the kubelet's probes and the API server's exec come from the
    node, which NetworkPolicy implementations admit."""
    own = {"podSelector": {"matchLabels": {JOB_NAME_LABEL: job.name}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(job, network_policy_name(job)),
        "spec": {
            "podSelector": {"matchLabels": {JOB_NAME_LABEL: job.name}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [own]}],
        },
    }


def network_policy_name(job: DGLJob) -> str:
    return f"{job.name}-pods"


def _transfer_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """dglrun's --partition-transfer; over HTTP, where to find the partitioner's IP."""
    if not job.spec.mode.partitioner:
        return ()
    return env_pairs(
        dglrun.PARTITION_TRANSFER.pair(DGLRUN_TRANSFER[job.spec.partition_transfer]),
        dglrun.PARTFILE_PATH.pair(pc.PARTFILE_PATH) if job.spec.pulls_partitions else None,
    )


def _mount_token(job: DGLJob, pod: Obj) -> None:
    """The job's transfer token at pc.TRANSFER_DIR/token (HTTP only)."""
    if not job.spec.pulls_partitions:
        return
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[TRANSFER_SECRET_ANNOTATION] = transfer_secret_name(job)
    _add_mounts(_main(pod), (TRANSFER_VOLUME, pc.TRANSFER_DIR))
    volume = {
        "name": TRANSFER_VOLUME,
        "secret": {
            "secretName": transfer_secret_name(job),
            "items": [
                {"key": pc.TRANSFER_TOKEN_KEY, "path": pc.TRANSFER_TOKEN_KEY, "mode": MODE_READ}
            ],
        },
    }
    _add_volumes(pod["spec"], volume)


# -- the storage (spec.storage) ------------------------------------------------------------


def storage_claim(job: DGLJob) -> Obj | None:
    """``<job>-results`` from ``spec.storage.claimTemplate`` (None otherwise): owned by the job
    with claimPolicy Delete, else left to outlive it (labelled, so that a job of the same name
    later uses it again and nobody else's claim is ever taken)."""
    st = job.spec.storage
    if st is None or st.claim_template is None:
        return None
    name = job.claim_name
    assert name is not None
    tmeta = st.claim_template.get("metadata") or {}
    meta = _meta(job, name, tmeta.get("labels") or {})
    meta["annotations"] = {
        **(tmeta.get("annotations") or {}),
        CLAIM_POLICY_ANNOTATION: st.claim_policy,
    }
    if st.claim_policy != CLAIM_DELETE:
        del meta["ownerReferences"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": copy.deepcopy(st.claim_template["spec"]),
    }


def storage_folder(job: DGLJob) -> str:
    """The folder dglrun keeps things in, as the pods see it."""
    st = job.spec.storage
    return f"{pc.STORAGE_DIR}/{st.path}" if st is not None and st.path else pc.STORAGE_DIR


def results_location(job: DGLJob) -> str | None:
    """Where the job's results are: ``<claim>:<folder in the claim>`` (``status.results``)."""
    st = job.spec.storage
    if st is None:
        return None
    inside = "/".join(x for x in (st.path, pc.STORAGE_RUNS, job.run_name, pc.RUN_OUTPUT) if x)
    return f"{job.claim_name}:/{inside}"


def _storage_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    st = job.spec.storage
    if st is None:
        return ()
    return env_pairs(
        dglrun.STORAGE.pair(storage_folder(job)),
        dglrun.RUN_NAME.pair(job.run_name),
        dglrun.SHARE_PARTITIONS.pair(True) if st.share_partitions else None,
        None if st.cache_limit is None else dglrun.CACHE_LIMIT.pair(st.cache_limit),
    )


def _mount_storage(job: DGLJob, pod: Obj) -> None:
    """The storage's claim at pc.STORAGE_DIR in the pod's first container, and in the
    template's own init containers (e.g. one that generates a worker's chunks once onto the
    claim, and finds them there at the next attempt; call before the operator adds its own,
    which never get it)."""
    if job.claim_name is None:
        return
    for container in [_main(pod), *(pod["spec"].get("initContainers") or [])]:
        _add_mounts(container, (STORAGE_VOLUME, pc.STORAGE_DIR))
    claim = {"name": STORAGE_VOLUME, "persistentVolumeClaim": {"claimName": job.claim_name}}
    _add_volumes(pod["spec"], claim)


# -- pods and services ----------------------------------------------------------------------


def _dgl_ports() -> list[Obj]:
    return [
        {
            "name": "dglserver" if k == 0 else f"dglserver-{k}",
            "containerPort": pc.DGL_PORT + k,
            "protocol": "TCP",
        }
        for k in range(pc.DGL_PORT_COUNT)
    ]


def worker_pod(job: DGLJob, index: int, attempt: int = 0) -> Obj:
    assert job.spec.worker is not None
    name = job.worker_name(index)
    pod = _base_pod(job, job.spec.worker.template, name, WORKER, attempt)
    main = _main(pod)
    if not main.get("command"):
        main["command"] = ["sleep"]
        main["args"] = ["365d"]
    _set_env(main, (pc.OPERATOR_ENV, pc.OPERATOR_ENV_ON))
    taken = {p.get("containerPort") for p in main.get("ports") or []}
    main["ports"] = (main.get("ports") or []) + [
        p for p in _dgl_ports() if p["containerPort"] not in taken
    ]
    _add_mounts(main, (SHM_VOLUME, "/dev/shm"), (CONFIG_VOLUME, pc.CONFIG_DIR))
    shm: Obj = {"medium": "Memory"}
    size = shm_size_limit(main)
    if size:
        shm["sizeLimit"] = size
    _add_volumes(
        pod["spec"], {"name": SHM_VOLUME, "emptyDir": shm}, _config_volume(job, ALL_CONFIG_KEYS)
    )
    _mount_token(job, pod)
    _mount_storage(job, pod)  # the trainers' checkpoints and results
    _spread(job, pod)
    # DNS name <pod>.<job>-worker (the EndpointSlice names a pod only with both fields set),
    # unless the template chose its own subdomain
    if "subdomain" not in pod["spec"]:
        pod["spec"]["subdomain"] = worker_service_name(job)
        pod["spec"].setdefault("hostname", name)
    return pod


def worker_spread(job: DGLJob) -> Obj:
    """One worker per node while there are free nodes, but never a reason to wait: a soft
    (ScheduleAnyway) spread of this job's workers over the nodes."""
    return {
        "maxSkew": 1,
        "topologyKey": HOSTNAME_TOPOLOGY_KEY,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {JOB_NAME_LABEL: job.name, REPLICA_TYPE_LABEL: WORKER}},
    }


def _spread(job: DGLJob, pod: Obj) -> None:
    """The default spread, unless the Worker template places its pods itself (it sets
    topologySpreadConstraints, even [], or a podAntiAffinity)."""
    spec = pod["spec"]
    if "topologySpreadConstraints" in spec or (spec.get("affinity") or {}).get("podAntiAffinity"):
        return
    spec["topologySpreadConstraints"] = [worker_spread(job)]


def worker_service_name(job: DGLJob) -> str:
    return f"{job.name}-worker"


def worker_service(job: DGLJob) -> Obj:
    """``<job>-worker``: one headless Service for all of the job's workers (not one per
    worker, as the original had: a job's objects, its EndpointSlices and its API requests no
    longer grow with its workers). With each worker's ``subdomain`` set to it, worker i is
    ``<job>-worker-i.<job>-worker`` in the cluster's DNS, ready or not."""
    name = worker_service_name(job)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(job, name, {REPLICA_TYPE_LABEL: WORKER}),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_NAME_LABEL: job.name, REPLICA_TYPE_LABEL: WORKER},
            "ports": [
                {"name": p["name"], "port": p["containerPort"], "protocol": "TCP"}
                for p in _dgl_ports()
            ],
        },
    }


def _operator_env(job: DGLJob, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return (
        dglrun.KUBEXEC_PATH.pair(pc.KUBEXEC_PATH),
        dglrun.HOSTFILE_PATH.pair(pc.HOSTFILE_PATH),
        dglrun.KUBECTL_PATH.pair(pc.KUBECTL_PATH),
        dglrun.OPERATOR.pair(True),
        # dglrun reports its progress into this DGLJob's status.progress, and Events
        dglrun.JOB_NAME.pair(job.name),
        dglrun.JOB_UID.pair(job.uid),
        dglrun.JOB_NAMESPACE.pair(job.namespace),
        *_memory_env(job),
        *_storage_env(job),
        *_elastic_env(job),
        *_out_of_core_env(job),
        *extra,
    )


def _out_of_core_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """spec.outOfCore as dglrun's --out-of-core and --page-cache-fraction."""
    ooc = job.spec.out_of_core
    if ooc is None:
        return ()
    return (
        dglrun.OUT_OF_CORE.pair(True),
        dglrun.PAGE_CACHE_FRACTION.pair(ooc.page_cache_fraction),
    )


def _elastic_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """An elastic job's rule, and its attempt's count once the members are chosen (the
    partitioner, made before, reads it from the job's status)."""
    policy = job.spec.elastic
    if policy is None:
        return ()
    members = job.spec.members
    return env_pairs(
        dglrun.ELASTIC.pair(True),
        dglrun.PARTITION_COUNTS.pair(tuple(range(policy.min_replicas, policy.ceiling + 1))),
        None if members is None else dglrun.NUM_PARTITIONS.pair(len(members)),
    )


def _memory_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The Worker template's memory limit (the partitioner runs on that template too), which
    dglrun's memory plan checks every step against before partitioning."""
    if job.spec.worker is None:
        return ()
    containers = (job.spec.worker.template.get("spec") or {}).get("containers") or [{}]
    limit = memory_limit(containers[0])
    return () if limit is None else (dglrun.WORKER_MEMORY_LIMIT.pair(limit),)


def _mode_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The ParMETIS modes' settings, as dglrun's defaults (none in DGL-API: its pods are the
    original operator's)."""
    cg = job.spec.chunked_graph
    if cg is None:
        return ()
    return (
        dglrun.PARTITION_MODE.pair(job.spec.partition_mode),
        dglrun.CHUNKED_GRAPH.pair(cg.path),
        dglrun.CHUNKED_LAYOUT.pair(cg.layout),
    )


def _cpu_limit_env(container: Obj) -> Obj:
    """The container's CPU limit in whole cores, through the downward API (the node's
    allocatable CPUs when it has no limit)."""
    return {
        "name": pc.CPU_LIMIT_ENV,
        "valueFrom": {
            "resourceFieldRef": {
                "containerName": container["name"],
                "resource": "limits.cpu",
                "divisor": "1",
            }
        },
    }


def partitioner_pod(job: DGLJob, opts: BuildOptions, attempt: int = 0) -> Obj:
    """The Worker template running the Launcher's command with the Partitioner phase."""
    assert job.spec.worker is not None
    name = job.partitioner_name
    pod = _base_pod(job, job.spec.worker.template, name, PARTITIONER, attempt)
    main = _main(pod)
    launcher_main = job.spec.launcher.template["spec"]["containers"][0]
    for key in ("command", "args"):
        if launcher_main.get(key) is not None:
            main[key] = copy.deepcopy(launcher_main[key])
        else:
            main.pop(key, None)
    _set_env(
        main,
        *_operator_env(
            job,
            (pc.LEADFILE_PATH_ENV, pc.LEADFILE_PATH),
            (pc.PHASE_ENV, pc.PHASE_PARTITIONER),
            *_mode_env(job),
            *_transfer_env(job),
        ),
    )
    if job.spec.pulls_partitions:
        taken = {p.get("containerPort") for p in main.get("ports") or []}
        if pc.TRANSFER_PORT not in taken:
            port = {"name": "partitions", "containerPort": pc.TRANSFER_PORT, "protocol": "TCP"}
            main["ports"] = [*(main.get("ports") or []), port]
        # Ready = serving the parts: what the launcher's watcher-loop waits for
        main["readinessProbe"] = {
            "httpGet": {"path": pc.TRANSFER_READY_PATH, "port": pc.TRANSFER_PORT},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
            "failureThreshold": 1,
        }
        _mount_token(job, pod)
    _mount_storage(job, pod)  # the partitions cached for restarts
    if job.spec.chunked_graph is not None:
        main["env"] = [e for e in main["env"] if e.get("name") != pc.CPU_LIMIT_ENV]
        main["env"].append(_cpu_limit_env(main))
    _add_mounts(main, (CONFIG_VOLUME, pc.CONFIG_DIR), (KUBE_VOLUME, pc.KUBE_DIR))
    spec = pod["spec"]
    spec["serviceAccountName"] = name
    spec["initContainers"] = [_kubectl_download(opts), *(spec.get("initContainers") or [])]
    _add_volumes(spec, _config_volume(job, ALL_CONFIG_KEYS), {"name": KUBE_VOLUME, "emptyDir": {}})
    return pod


def probe_pod(job: DGLJob, opts: BuildOptions, attempt: int = 0) -> Obj:
    """An elastic job's room-finder: the partitioner's pod as the scheduler sees it (its main
    container's requests and limits, its node selector, affinity, tolerations, priority and
    volumes), running nothing but ``sleep``. Placed, it shows that the next attempt's
    partitioner has room beside the standby workers that run (controller/lifecycle/elastic.py)."""
    pod = partitioner_pod(job, opts, attempt)
    meta = pod["metadata"]
    meta["name"] = job.probe_name
    meta["labels"].update({REPLICA_NAME_LABEL: job.probe_name, REPLICA_TYPE_LABEL: PROBE})
    meta["annotations"][REPLICA_ANNOTATION] = PROBE
    main = _main(pod)
    keep = ("name", "image", "imagePullPolicy", "resources", "volumeMounts")
    spec = pod["spec"]
    # (the partitioner's requests and limits, as the scheduler must see them; the operator's
    # own restricted context: sleep needs no more, whatever the template's says)
    probe = {k: main[k] for k in keep if k in main}
    probe["command"] = ["sleep", "infinity"]
    probe["securityContext"] = copy.deepcopy(OWN_SECURITY_CONTEXT)
    spec["containers"] = [probe]
    spec["securityContext"] = {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        **{k: v for k, v in (spec.get("securityContext") or {}).items() if k == "fsGroup"},
    }
    spec.pop("initContainers", None)
    spec["terminationGracePeriodSeconds"] = 0
    return pod


def launcher_pod(job: DGLJob, opts: BuildOptions, attempt: int = 0) -> Obj:
    name = job.launcher_name
    pod = _base_pod(job, job.spec.launcher.template, name, LAUNCHER, attempt)
    main = _main(pod)
    spec = pod["spec"]
    _mount_storage(job, pod)
    if not job.spec.mode.workers:
        _set_env(main, (pc.PHASE_ENV, pc.PHASE_LAUNCHER_WORKLOAD), *_storage_env(job))
        return pod
    _set_env(main, *_operator_env(job, *_mode_env(job), *_transfer_env(job)))
    config_mount = {"name": CONFIG_VOLUME, "mountPath": pc.CONFIG_DIR}
    _add_mounts(main, (KUBE_VOLUME, pc.KUBE_DIR), (CONFIG_VOLUME, pc.CONFIG_DIR))
    waits = []
    volumes: list[Obj] = [{"name": KUBE_VOLUME, "emptyDir": {}}]
    if job.spec.pulls_partitions:
        # the partitioner is Ready once it serves the parts; then the launcher starts
        waits.append(
            _watcher_loop(
                job,
                opts,
                pc.WATCHER_PARTITIONER,
                pc.PARTFILE_PATH,
                pc.WATCH_READY,
                1,
                [config_mount],
            )
        )
        _mount_token(job, pod)
    elif job.spec.mode.partitioner:
        # the partitioner delivers the partitions into this volume, then the launcher starts
        _add_mounts(main, (DATASET_VOLUME, pc.DATASET_DIR))
        volumes.append({"name": DATASET_VOLUME, "emptyDir": {}})
        waits.append(
            _watcher_loop(
                job,
                opts,
                pc.WATCHER_PARTITIONER,
                pc.PARTFILE_PATH,
                pc.WATCH_FINISHED,
                1,
                [config_mount, {"name": DATASET_VOLUME, "mountPath": pc.DATASET_DIR}],
            )
        )
    spec["serviceAccountName"] = name
    spec["initContainers"] = [
        _kubectl_download(opts),
        *waits,
        _watcher_loop(
            job,
            opts,
            pc.WATCHER_WORKERS,
            pc.HOSTFILE_PATH,
            pc.WATCH_READY,
            len(job.spec.training_workers),
            [config_mount],
        ),
        *(spec.get("initContainers") or []),
    ]
    _add_volumes(spec, *volumes, _config_volume(job, LAUNCHER_CONFIG_KEYS))
    return pod


# -- gang scheduling (--gang-scheduling) ----------------------------------------------------


def pod_group(job: DGLJob) -> Obj:
    """``<job>``: scheduler-plugins' PodGroup. Coscheduling places none of the job's pods
    before ``minMember`` of them can all be placed. (It has no queue or priority field:
    ``schedulingPolicy.queue`` means nothing to it; ``priorityClass`` is on the pods.)"""
    spec: Obj = {"minMember": job.spec.min_available}
    timeout = job.spec.run_policy.scheduling_policy.schedule_timeout_seconds
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": _meta(job, job.name),
        "spec": spec,
    }


def _join_gang(opts: BuildOptions, job: DGLJob, pod: Obj) -> Obj:
    """The pod belongs to the job's PodGroup and goes to the gang scheduler (unless its
    template names a scheduler: the user's choice stands)."""
    pod["metadata"]["labels"][POD_GROUP_LABEL] = job.name
    pod["spec"].setdefault("schedulerName", opts.gang_scheduler_name)
    return pod


@dataclass(frozen=True)
class Desired:
    """Everything a job should have, in creation order."""

    claim: Obj | None  # spec.storage.claimTemplate's
    config_map: Obj | None
    rbac: list[Obj]
    transfer: list[Obj]  # HTTP: the token Secret
    services: list[Obj]
    workers: list[Obj]
    partitioner: Obj | None
    launcher: Obj
    pod_group: Obj | None = None  # gang scheduling: created before any pod
    network: list[Obj] = field(default_factory=list)  # the NetworkPolicy: before any pod

    @property
    def once(self) -> list[Obj]:
        """The children created once and left alone, in creation order."""
        group = [self.pod_group] if self.pod_group else []
        return [*group, *self.network, *self.rbac, *self.transfer]


def desired(
    job: DGLJob,
    opts: BuildOptions,
    pods: Mapping[str, Obj] | None = None,
    attempt: int = 0,
    token: str = "",
) -> Desired:
    """All children of ``job``; ``pods`` (by name) supplies the IPs for the ConfigMap;
    ``token`` the transfer Secret's (random if not given: only its creation uses it)."""
    mode = job.spec.mode
    gang = opts.gang and job.spec.gang
    group = pod_group(job) if gang else None

    def pod(built: Obj) -> Obj:
        return _join_gang(opts, job, built) if gang else built

    network = [network_policy(job)] if opts.network_policy else []
    if not mode.workers:
        launcher = pod(launcher_pod(job, opts, attempt))
        return Desired(
            storage_claim(job), None, [], [], [], [], None, launcher, group, network=network
        )
    n = job.spec.workers
    transfer = []
    if job.spec.pulls_partitions:
        transfer = [transfer_secret(job, token or secrets.token_hex(32))]
    return Desired(
        claim=storage_claim(job),
        config_map=config_map(job, pods or {}),
        rbac=rbac(job),
        transfer=transfer,
        services=[worker_service(job)],
        workers=[pod(worker_pod(job, i, attempt)) for i in range(n)],
        partitioner=pod(partitioner_pod(job, opts, attempt)) if mode.partitioner else None,
        launcher=pod(launcher_pod(job, opts, attempt)),
        pod_group=group,
        network=network,
    )
