"""The job's pods: its workers, its partitioner and its launcher, each from its replica's
template, with what the operator adds (its init containers, the config and kubectl volumes, the
env of controller/builders/env.py, and the features' mounts: the storage's, the transfer
token's)."""

from __future__ import annotations

import copy

import podcontract as pc
from controller.api import LAUNCHER, PARTITIONER, WORKER, DGLJob
from controller.builders.configmap import ALL_CONFIG_KEYS, LAUNCHER_CONFIG_KEYS, _config_volume
from controller.builders.env import _cpu_limit_env, operator_env, shm_size_limit, workload_env
from controller.builders.meta import (
    ATTEMPT_ANNOTATION,
    CONFIG_VOLUME,
    DATASET_VOLUME,
    JOB_NAME_LABEL,
    KUBE_VOLUME,
    REPLICA_ANNOTATION,
    REPLICA_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    SHM_VOLUME,
    _add_mounts,
    _add_volumes,
    _env,
    _main,
    _meta,
    _own,
    _set_env,
)
from controller.builders.options import BuildOptions
from controller.builders.service import _dgl_ports, worker_service_name
from controller.features.storage import _mount_storage
from controller.features.transfer import _mount_token
from dgljob.names import ACCOUNT_FIELDS
from kubeclient import Obj
from podcontract import settings as dglrun

# Placement: the workers spread over the nodes, softly (see worker_pod)
HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"
AGENT_VOLUME = "dgl-agent"  # the worker agent's zipapp (an emptyDir)


def _agent_port() -> Obj:
    return {"name": "dgl-agent", "containerPort": pc.AGENT_PORT, "protocol": "TCP"}


def _base_pod(job: DGLJob, template: Obj, name: str, replica_type: str, attempt: int) -> Obj:
    tpl = copy.deepcopy(template)
    tmeta = tpl.get("metadata") or {}
    spec = tpl.get("spec") or {}
    spec["restartPolicy"] = "Never"
    priority = job.spec.run_policy.scheduling_policy.priority_class
    if priority and not spec.get("priorityClassName"):
        spec["priorityClassName"] = priority
    added: Obj = {
        "labels": dict(tmeta.get("labels") or {}),
        "annotations": dict(tmeta.get("annotations") or {}),
    }
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": added, "spec": spec}
    placed = job.spec.placement.get(replica_type)
    if placed is not None:  # a queued job's admission (its Placement)
        placed.apply(pod)
    # then the operator's own labels and annotations: an admission's (or a template's) may add
    # to them, never replace them (the job-name label is what the job's Service and
    # NetworkPolicy select: another value would move the pod into another job's)
    meta = _meta(
        job, name, {**added["labels"], REPLICA_NAME_LABEL: name, REPLICA_TYPE_LABEL: replica_type}
    )
    meta["annotations"] = {
        **added["annotations"],
        REPLICA_ANNOTATION: replica_type,
        ATTEMPT_ANNOTATION: str(attempt),
    }
    pod["metadata"] = meta
    return pod


def _api_token(spec: Obj, needed: bool) -> None:
    """Whether the pod gets a service-account token: the launcher and the partitioner do
    (``needed``: kubectl, with the account the operator made for them, whatever the template
    says); a worker talks to no API (the launcher reaches it through its agent, it pulls its
    partitions over HTTP with the job's token), so it gets none, unless its template names
    an account of its own: then the template's automountServiceAccountToken (or the
    account's) decides."""
    if needed:
        spec["automountServiceAccountToken"] = True
    elif not any(spec.get(key) for key in ACCOUNT_FIELDS):
        spec["automountServiceAccountToken"] = False


def _wear(spec: Obj, account: str) -> None:
    """The pod runs as ``account`` (one the operator made), with its token."""
    spec.pop("serviceAccount", None)  # (the deprecated alias: serviceAccountName wins anyway)
    spec["serviceAccountName"] = account
    _api_token(spec, needed=True)


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


# A worker template's command that only keeps the container running (the seed's and the
# examples' placeholder): the agent does that now, so it is dropped rather than run beside it
PLACEHOLDERS = ("sleep",)


def _agent_install(opts: BuildOptions) -> Obj:
    """The init container that copies the worker agent (workeragent/) out of the operator's
    image, as one zipapp the worker image's Python runs."""
    return _own(
        {
            "name": pc.AGENT_INIT_CONTAINER,
            "image": opts.watcher_loop_image,
            "imagePullPolicy": opts.init_image_pull_policy,
            "command": ["python3", "-m", "workeragent.install", pc.AGENT_DIR],
            "volumeMounts": [{"name": AGENT_VOLUME, "mountPath": pc.AGENT_DIR}],
        }
    )


def agent_command(template_main: Obj) -> list[str]:
    """The worker's main process: the agent (dglrun starts the DGL processes through it). The
    template's own command and args, unless a placeholder (:data:`PLACEHOLDERS`), run beside
    it, started by the agent (``--``); with neither, the image's entrypoint does not run."""
    argv = ["python3", pc.AGENT_ZIPAPP, "--token-file", pc.AGENT_TOKEN_PATH]
    own = [*(template_main.get("command") or []), *(template_main.get("args") or [])]
    if template_main.get("command") and template_main["command"][0] not in PLACEHOLDERS:
        argv += ["--", *own]
    return argv


def worker_pod(job: DGLJob, index: int, attempt: int = 0, opts: BuildOptions | None = None) -> Obj:
    assert job.spec.worker is not None
    opts = opts or BuildOptions()
    name = job.worker_name(index)
    pod = _base_pod(job, job.spec.worker.template, name, WORKER, attempt)
    main = _main(pod)
    main["command"] = agent_command(main)
    main.pop("args", None)
    _set_env(main, dglrun.OPERATOR.pair(True))
    taken = {p.get("containerPort") for p in main.get("ports") or []}
    main["ports"] = (main.get("ports") or []) + [
        p for p in [*_dgl_ports(), _agent_port()] if p["containerPort"] not in taken
    ]
    # Ready = the agent serves: what the launcher's watcher-loop waits for
    main.setdefault(
        "readinessProbe",
        {
            "httpGet": {"path": pc.AGENT_HEALTH_PATH, "port": pc.AGENT_PORT},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
    )
    _add_mounts(
        main, (SHM_VOLUME, "/dev/shm"), (CONFIG_VOLUME, pc.CONFIG_DIR), (AGENT_VOLUME, pc.AGENT_DIR)
    )
    shm: Obj = {"medium": "Memory"}
    size = shm_size_limit(main)
    if size:
        shm["sizeLimit"] = size
    _add_volumes(
        pod["spec"], {"name": SHM_VOLUME, "emptyDir": shm}, _config_volume(job, ALL_CONFIG_KEYS)
    )
    _mount_token(job, pod)
    _mount_storage(job, pod)  # the trainers' checkpoints and results
    # (after the storage's mounts: the operator's own init containers never mount the claim)
    pod["spec"]["initContainers"] = [
        _agent_install(opts),
        *(pod["spec"].get("initContainers") or []),
    ]
    _add_volumes(pod["spec"], {"name": AGENT_VOLUME, "emptyDir": {}})
    _api_token(pod["spec"], needed=False)
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
        *operator_env(
            job,
            PARTITIONER,
            dglrun.LEADFILE_PATH.pair(pc.LEADFILE_PATH),
            dglrun.PHASE.pair(pc.PHASE_PARTITIONER),
            dglrun.ATTEMPT.pair(attempt),
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
        main["env"] = [e for e in main["env"] if e.get("name") != dglrun.CPU_LIMIT.env]
        main["env"].append(_cpu_limit_env(main))
    _add_mounts(main, (CONFIG_VOLUME, pc.CONFIG_DIR), (KUBE_VOLUME, pc.KUBE_DIR))
    spec = pod["spec"]
    _wear(spec, name)
    spec["initContainers"] = [_kubectl_download(opts), *(spec.get("initContainers") or [])]
    _add_volumes(spec, _config_volume(job, ALL_CONFIG_KEYS), {"name": KUBE_VOLUME, "emptyDir": {}})
    return pod


def launcher_pod(job: DGLJob, opts: BuildOptions, attempt: int = 0) -> Obj:
    name = job.launcher_name
    pod = _base_pod(job, job.spec.launcher.template, name, LAUNCHER, attempt)
    main = _main(pod)
    spec = pod["spec"]
    _mount_storage(job, pod)
    if not job.spec.mode.workers:
        _set_env(main, *workload_env(job))
        return pod
    _set_env(main, *operator_env(job, LAUNCHER, dglrun.ATTEMPT.pair(attempt)))
    config_mount = {"name": CONFIG_VOLUME, "mountPath": pc.CONFIG_DIR}
    _add_mounts(main, (KUBE_VOLUME, pc.KUBE_DIR), (CONFIG_VOLUME, pc.CONFIG_DIR))
    waits = []
    volumes: list[Obj] = [{"name": KUBE_VOLUME, "emptyDir": {}}]
    if job.spec.pulls_partitions:
        # the partitioner is Ready once it serves the parts; then the launcher starts (or it
        # has served them and finished: a launcher made again mid-training, to re-attach)
        waits.append(
            _watcher_loop(
                job,
                opts,
                pc.WATCHER_PARTITIONER,
                pc.PARTFILE_PATH,
                pc.WATCH_SERVED,
                1,
                [config_mount],
            )
        )
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
    _mount_token(job, pod)  # (the workers' agents ask it; over HTTP, the partitioner too)
    _wear(spec, name)
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
