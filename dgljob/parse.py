"""A raw DGLJob (the API server's JSON) to the typed model (:mod:`dgljob.model`), checked.

The CRD (charts/dgl-operator/crds/qihoo.net_dgljobs.yaml) validates at admission; this parser
states the same rules again, so that an object that slipped past admission (an old CRD, a
cluster without CEL) ends ``Failed``/``InvalidSpec`` with a message naming the field instead
of crashing the controller, and adds the rules the CRD cannot state (a container's resource
quantities, spelled as Kubernetes parses them). tests/controller/test_crd.py proves the two
agree: every CEL rule and every ``raise SpecError`` here is hit by a malformed case that both
refuse (tests/support/malformed.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dgljob import modes
from dgljob.model import (
    ChunkedGraphSpec,
    DGLJob,
    ElasticPolicy,
    JobSpec,
    OutOfCoreSpec,
    ReplicaSpec,
    RunPolicy,
    SchedulingPolicy,
    StorageSpec,
)
from dgljob.names import (
    ACCOUNT_FIELDS,
    CLAIM_POLICIES,
    CLAIM_RETAIN,
    CLEAN_POD_POLICIES,
    CLEAN_RUNNING,
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_SETTLE_SECONDS,
    LAUNCHER,
    LAUNCHER_CREATION_POLICIES,
    MAX_BACKOFF_LIMIT,
    MAX_COOLDOWN_SECONDS,
    MAX_NAME,
    MAX_REPLICAS,
    MAX_SETTLE_SECONDS,
    MAX_SLOTS_PER_WORKER,
    OPERATOR_ACCOUNT_SUFFIXES,
    PARTITION_TRANSFERS,
    TRANSFER_HTTP,
    WAIT_FOR_WORKERS_READY,
    WORKER,
)
from podcontract import CHUNKED_LAYOUTS, DGL_API, OUT_OF_CORE_ORDERS, SHARED
from podcontract.quantity import parse_quantity
from podcontract.settings import OUT_OF_CORE_ORDER, PAGE_CACHE_FRACTION

STORAGE_KEYS = (
    "claimName",
    "claimTemplate",
    "claimPolicy",
    "path",
    "sharePartitions",
    "cacheLimit",
)
ELASTIC_KEYS = ("minReplicas", "maxReplicas", "settleSeconds", "cooldownSeconds")
OUT_OF_CORE_KEYS = ("enabled", "pageCacheFraction", "order")

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_STORAGE_PATH = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
# spec.storage.cacheLimit: a quantity of bytes (the CRD's pattern; at most 32 characters): a
# whole or decimal number, then one of Kubernetes' byte suffixes or none (no sign, exponent
# nor m)
CACHE_LIMIT = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


class SpecError(ValueError):
    """A DGLJob field is invalid; ``field`` is its path, e.g. ``spec.runPolicy.backoffLimit``."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


# -- parsing ------------------------------------------------------------------------------


def _int(value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    number: int
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise SpecError(field, f"must be an integer, got {value!r}")
    if minimum is not None and number < minimum:
        raise SpecError(field, f"must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise SpecError(field, f"must be <= {maximum}, got {number}")
    return number


def _opt_int(d: dict[str, Any], key: str, field: str, minimum: int) -> int | None:
    if d.get(key) is None:
        return None
    return _int(d[key], f"{field}.{key}", minimum=minimum)


def _choice(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SpecError(field, f"must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def _dict(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(field, f"must be an object, got {type(value).__name__}")
    return value


def _fields(value: Any, field: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """An object whose fields must be among ``keys`` (the first unknown one is named)."""
    obj = _dict(value, field)
    unknown = sorted(set(obj) - set(keys))
    if unknown:
        raise SpecError(f"{field}.{unknown[0]}", f"unknown field ({', '.join(keys)})")
    return obj


def _template(value: Any, field: str) -> dict[str, Any]:
    tpl = _dict(value, field)
    spec = tpl.get("spec")
    if spec is None:
        raise SpecError(f"{field}.spec", "is required")
    spec = _dict(spec, f"{field}.spec")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise SpecError(f"{field}.spec.containers", "must list at least one container")
    for i, c in enumerate(containers):
        cfield = f"{field}.spec.containers[{i}]"
        c = _dict(c, cfield)
        for required in ("name", "image"):
            if not isinstance(c.get(required), str) or not c.get(required):
                raise SpecError(f"{cfield}.{required}", "is required")
        for key in ("command", "args"):
            value = c.get(key)
            if value is None:
                continue
            if not isinstance(value, list):
                raise SpecError(f"{cfield}.{key}", "must be a list of strings")
            for j, item in enumerate(value):
                if not isinstance(item, str):
                    raise SpecError(
                        f"{cfield}.{key}[{j}]",
                        f'must be a string, got {item!r} (quote numbers in YAML: "{item}")',
                    )
        _resources(c.get("resources"), f"{cfield}.resources")
    for key in ACCOUNT_FIELDS:
        _account(spec.get(key), f"{field}.spec.{key}")
    return tpl


def _account(value: Any, field: str) -> None:
    """A template's service account: not one the operator makes for a job (``<job>-launcher``,
    ``<job>-partitioner``: rights on that job's pods, exec into its workers). The rule is the
    name's suffix, not a lookup of the jobs there are: a job made later would give the name
    to an account with those rights, and the CRD refuses the same at admission."""
    if value is None:
        return
    if not isinstance(value, str):
        raise SpecError(field, f"must be a string, got {value!r}")
    for suffix in OPERATOR_ACCOUNT_SUFFIXES:
        if value.endswith(suffix):
            raise SpecError(
                field,
                f'"{value}" is the service account of DGLJob {value[: -len(suffix)]}\'s '
                f"{suffix[1:]} (the operator makes <job>-launcher and <job>-partitioner, with "
                "rights on that job's pods): a template may not name it; name an account of "
                f"your own (not ending in {' or '.join(OPERATOR_ACCOUNT_SUFFIXES)})",
            )


def _resources(value: Any, field: str) -> None:
    """A container's ``resources``: each limit and request a quantity Kubernetes parses
    (``6K`` is refused here, naming the field and why, rather than by the API server when
    the pod is created, in its words)."""
    if value is None:
        return
    for kind in ("limits", "requests"):
        amounts = _dict(value, field).get(kind)
        if amounts is None:
            continue
        for name, amount in _dict(amounts, f"{field}.{kind}").items():
            try:
                parse_quantity(amount)
            except ValueError as e:
                raise SpecError(f"{field}.{kind}.{name}", str(e)) from None


def _replica(value: Any, field: str, *, exactly_one: bool) -> ReplicaSpec:
    rs = _dict(value, field)
    replicas = _int(rs.get("replicas", 1), f"{field}.replicas", minimum=1, maximum=MAX_REPLICAS)
    if exactly_one and replicas != 1:
        raise SpecError(f"{field}.replicas", f"Launcher replicas must be 1, got {replicas}")
    if "template" not in rs:
        raise SpecError(f"{field}.template", "is required")
    return ReplicaSpec(replicas, _template(rs["template"], f"{field}.template"))


def _run_policy(value: Any) -> RunPolicy:
    if value is None:
        return RunPolicy()
    rp = _dict(value, "spec.runPolicy")
    suspend = rp.get("suspend", False)
    if not isinstance(suspend, bool):
        raise SpecError("spec.runPolicy.suspend", f"must be true or false, got {suspend!r}")
    backoff = rp.get("backoffLimit")
    return RunPolicy(
        ttl_seconds_after_finished=_opt_int(rp, "ttlSecondsAfterFinished", "spec.runPolicy", 0),
        active_deadline_seconds=_opt_int(rp, "activeDeadlineSeconds", "spec.runPolicy", 1),
        backoff_limit=0
        if backoff is None
        else _int(backoff, "spec.runPolicy.backoffLimit", minimum=0, maximum=MAX_BACKOFF_LIMIT),
        suspend=suspend,
        scheduling_policy=_scheduling_policy(rp.get("schedulingPolicy")),
    )


def _scheduling_policy(value: Any) -> SchedulingPolicy:
    if value is None:
        return SchedulingPolicy()
    field = "spec.runPolicy.schedulingPolicy"
    sp = _dict(value, field)
    strings = {}
    for key in ("queue", "priorityClass"):
        text = sp.get(key, "")
        if not isinstance(text, str):
            raise SpecError(f"{field}.{key}", f"must be a string, got {text!r}")
        if text and not _DNS1123_SUBDOMAIN.match(text):
            raise SpecError(
                f"{field}.{key}",
                f"must be a lowercase DNS subdomain (the name of a {key}), got {text!r}",
            )
        strings[key] = text
    return SchedulingPolicy(
        min_available=_opt_int(sp, "minAvailable", field, 1),
        queue=strings["queue"],
        priority_class=strings["priorityClass"],
        schedule_timeout_seconds=_opt_int(sp, "scheduleTimeoutSeconds", field, 1),
    )


def _chunked_graph(value: Any, mode: modes.PartitionMode) -> ChunkedGraphSpec | None:
    field = "spec.chunkedGraph"
    if value is None:
        if mode.chunked_graph:
            raise SpecError(
                field,
                f"is required when partitionMode is {mode.name}: the folder (or metadata.json) "
                "of the chunked graph to partition, as the partitioning pods see it",
            )
        return None
    if not mode.chunked_graph:
        raise SpecError(
            field, f"is only used by partitionMode ParMETIS and DistParMETIS, not {mode.name}"
        )
    cg = _dict(value, field)
    unknown = sorted(set(cg) - {"path", "layout"})
    if unknown:
        raise SpecError(f"{field}.{unknown[0]}", "unknown field (path and layout are allowed)")
    path = cg.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise SpecError(f"{field}.path", f"must be an absolute path, got {path!r}")
    layout = _choice(cg.get("layout", SHARED), f"{field}.layout", CHUNKED_LAYOUTS)
    if layout not in mode.layouts:
        raise SpecError(
            f"{field}.layout",
            f"{layout} needs partitionMode DistParMETIS (ParMETIS runs every rank in one pod, "
            "which must see the whole graph: Shared)",
        )
    return ChunkedGraphSpec(path, layout)


def _storage(value: Any) -> StorageSpec | None:
    field = "spec.storage"
    if value is None:
        return None
    st = _fields(value, field, STORAGE_KEYS)
    name, template = st.get("claimName"), st.get("claimTemplate")
    if (name is None) == (template is None):
        raise SpecError(
            field,
            "set exactly one of claimName (a PersistentVolumeClaim you made) and claimTemplate "
            "(a claim the operator makes for the job)",
        )
    if name is not None and (
        not isinstance(name, str) or len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name)
    ):
        raise SpecError(f"{field}.claimName", f"{name!r} is not a PersistentVolumeClaim name")
    if template is not None:
        tpl = _dict(template, f"{field}.claimTemplate")
        extra = sorted(set(tpl) - {"metadata", "spec"})
        if extra:
            raise SpecError(
                f"{field}.claimTemplate.{extra[0]}", "unknown field (metadata and spec are allowed)"
            )
        if "spec" not in tpl:
            raise SpecError(
                f"{field}.claimTemplate.spec",
                "is required: a PersistentVolumeClaimSpec (accessModes, resources.requests."
                "storage, storageClassName, ...)",
            )
        _dict(tpl["spec"], f"{field}.claimTemplate.spec")
        meta = _dict(tpl.get("metadata") or {}, f"{field}.claimTemplate.metadata")
        for key in meta:
            if key not in ("labels", "annotations"):
                raise SpecError(
                    f"{field}.claimTemplate.metadata.{key}",
                    "unknown field (labels and annotations are allowed; the name is <job>-results)",
                )
    policy = st.get("claimPolicy")
    if policy is not None and template is None:
        raise SpecError(
            f"{field}.claimPolicy",
            "applies to a claim made from claimTemplate only (a claimName claim is yours: the "
            "operator never deletes it)",
        )
    path = st.get("path", "")
    if not isinstance(path, str) or (
        path and (len(path) > 200 or not _STORAGE_PATH.match(path) or ".." in path.split("/"))
    ):
        raise SpecError(
            f"{field}.path",
            f"{path!r} must be a relative folder inside the claim (letters, digits, '.', '_', "
            "'-' and '/'; no '..')",
        )
    share = st.get("sharePartitions", False)
    if not isinstance(share, bool):
        raise SpecError(f"{field}.sharePartitions", f"must be true or false, got {share!r}")
    limit = st.get("cacheLimit")
    if limit is not None and not (
        isinstance(limit, str) and len(limit) <= 32 and CACHE_LIMIT.match(limit)
    ):
        raise SpecError(
            f"{field}.cacheLimit",
            f"{limit!r} is not a quantity of bytes such as 20Gi or 500G (a number, then Ki, Mi, "
            "Gi, Ti, Pi, Ei for powers of 1024 or k, M, G, T, P, E for powers of 1000; quoted "
            "in YAML)",
        )
    return StorageSpec(
        claim_name=name,
        claim_template=template,
        claim_policy=_choice(policy or CLAIM_RETAIN, f"{field}.claimPolicy", CLAIM_POLICIES),
        path=path.strip("/"),
        share_partitions=share,
        cache_limit=limit,
    )


def _out_of_core(value: Any, mode: modes.PartitionMode) -> OutOfCoreSpec | None:
    field = "spec.outOfCore"
    if value is None:
        return None
    ooc = _fields(value, field, OUT_OF_CORE_KEYS)
    enabled = ooc.get("enabled", False)
    if not isinstance(enabled, bool):
        raise SpecError(f"{field}.enabled", f"must be true or false, got {enabled!r}")
    fraction = ooc.get("pageCacheFraction", PAGE_CACHE_FRACTION.default)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or not (0 <= fraction <= 1)
    ):
        raise SpecError(
            f"{field}.pageCacheFraction", f"must be a number from 0 to 1, got {fraction!r}"
        )
    order = _choice(
        ooc.get("order", OUT_OF_CORE_ORDER.default), f"{field}.order", OUT_OF_CORE_ORDERS
    )
    if enabled and not mode.workers:
        raise SpecError(
            f"{field}.enabled",
            "needs workers: partitionMode Skip runs the launcher alone, in memory",
        )
    return OutOfCoreSpec(enabled, float(fraction), order) if enabled else None


def _elastic(
    value: Any, worker: ReplicaSpec | None, mode: modes.PartitionMode
) -> ElasticPolicy | None:
    field = "spec.elasticPolicy"
    if value is None:
        return None
    ep = _fields(value, field, ELASTIC_KEYS)
    if worker is None:
        raise SpecError(field, f"partitionMode {mode.name} has no workers to scale")
    low = _int(ep.get("minReplicas", 1), f"{field}.minReplicas", minimum=1, maximum=MAX_REPLICAS)
    high = _int(
        ep.get("maxReplicas", worker.replicas),
        f"{field}.maxReplicas",
        minimum=1,
        maximum=MAX_REPLICAS,
    )
    if low > high:
        raise SpecError(f"{field}.minReplicas", f"is {low}, more than maxReplicas ({high})")
    if not low <= worker.replicas <= high:
        raise SpecError(
            "spec.dglReplicaSpecs.Worker.replicas",
            f"is {worker.replicas}, outside elasticPolicy's [minReplicas, maxReplicas] = "
            f"[{low}, {high}]",
        )
    return ElasticPolicy(
        min_replicas=low,
        max_replicas=high,
        settle_seconds=_int(
            ep.get("settleSeconds", DEFAULT_SETTLE_SECONDS),
            f"{field}.settleSeconds",
            minimum=0,
            maximum=MAX_SETTLE_SECONDS,
        ),
        cooldown_seconds=_int(
            ep.get("cooldownSeconds", DEFAULT_COOLDOWN_SECONDS),
            f"{field}.cooldownSeconds",
            minimum=0,
            maximum=MAX_COOLDOWN_SECONDS,
        ),
    )


def validate_elastic(spec: JobSpec) -> None:
    """What an elastic job needs of the rest of its spec."""
    if spec.elastic is None:
        return
    if spec.storage is None:
        raise SpecError(
            "spec.elasticPolicy",
            "needs spec.storage: a rescale stops the job at an epoch boundary and resumes it "
            "from the checkpoint kept there, with partitions cached there for each count",
        )
    if spec.run_policy.scheduling_policy.min_available is not None:
        raise SpecError(
            "spec.runPolicy.schedulingPolicy.minAvailable",
            "must not be set with spec.elasticPolicy: an elastic job starts with the workers "
            "that fit and never joins a gang (minReplicas is the fewest it trains with)",
        )


def validate_name(name: str, spec: JobSpec) -> None:
    if not _DNS1035.match(name):
        raise SpecError(
            "metadata.name",
            f"{name!r} must be a DNS-1035 label (lowercase letters, digits and '-', starting "
            "with a letter): it names the job's pods and Services",
        )
    longest = [f"{name}-launcher"]
    if spec.mode.partitioner:
        longest.append(f"{name}-partitioner")
    if spec.mode.workers:
        longest.append(f"{name}-worker-{max(spec.workers - 1, 0)}")
    for derived in longest:
        if len(derived) > MAX_NAME:
            raise SpecError(
                "metadata.name",
                f"is too long: derived pod name {derived!r} has {len(derived)} characters, "
                f"the limit is {MAX_NAME}",
            )


def validate_scheduling(spec: JobSpec) -> None:
    wanted = spec.run_policy.scheduling_policy.min_available
    if wanted is None or wanted <= spec.gang_size:
        return
    later = (
        ""
        if spec.launcher_with_the_rest
        else " (the launcher is not counted: launcherCreationPolicy WaitForWorkersReady creates "
        "it only once the workers run)"
    )
    raise SpecError(
        "spec.runPolicy.schedulingPolicy.minAvailable",
        f"is {wanted}, more than the {spec.gang_size} pods the job creates at once{later}; "
        "such a gang would never be scheduled",
    )


def parse_spec(spec_obj: Any) -> JobSpec:
    spec = _dict(spec_obj, "spec")
    mode = _choice(spec.get("partitionMode", DGL_API), "spec.partitionMode", modes.PARTITION_MODES)
    chunked = _chunked_graph(spec.get("chunkedGraph"), modes.MODES[mode])
    # KubectlCp (kubectl cp through the API server) needs pods/exec, which no pod of a job
    # holds since the workers' agents: a manifest that asks for it is served over HTTP
    _choice(
        spec.get("partitionTransfer", TRANSFER_HTTP), "spec.partitionTransfer", PARTITION_TRANSFERS
    )
    transfer = TRANSFER_HTTP
    clean = _choice(
        spec.get("cleanPodPolicy", CLEAN_RUNNING), "spec.cleanPodPolicy", CLEAN_POD_POLICIES
    )
    slots = _int(
        spec.get("slotsPerWorker", 1),
        "spec.slotsPerWorker",
        minimum=1,
        maximum=MAX_SLOTS_PER_WORKER,
    )
    creation = _choice(
        spec.get("launcherCreationPolicy", WAIT_FOR_WORKERS_READY),
        "spec.launcherCreationPolicy",
        LAUNCHER_CREATION_POLICIES,
    )
    if "dglReplicaSpecs" not in spec:
        raise SpecError("spec.dglReplicaSpecs", "is required")
    replica_specs = _dict(spec["dglReplicaSpecs"], "spec.dglReplicaSpecs")
    unknown = sorted(set(replica_specs) - {LAUNCHER, WORKER})
    if unknown:
        raise SpecError(
            "spec.dglReplicaSpecs",
            f"unknown replica type(s) {', '.join(unknown)}; only Launcher and Worker are allowed",
        )
    if LAUNCHER not in replica_specs:
        raise SpecError("spec.dglReplicaSpecs.Launcher", "is required")
    launcher = _replica(replica_specs[LAUNCHER], "spec.dglReplicaSpecs.Launcher", exactly_one=True)
    worker: ReplicaSpec | None = None
    if not modes.MODES[mode].workers:
        if WORKER in replica_specs:
            raise SpecError(
                "spec.dglReplicaSpecs.Worker",
                "must not be set when partitionMode is Skip (Skip runs the launcher alone)",
            )
    else:
        if WORKER not in replica_specs:
            raise SpecError(
                "spec.dglReplicaSpecs.Worker", "is required unless partitionMode is Skip"
            )
        worker = _replica(replica_specs[WORKER], "spec.dglReplicaSpecs.Worker", exactly_one=False)
    job_spec = JobSpec(
        partition_mode=mode,
        clean_pod_policy=clean,
        slots_per_worker=slots,
        launcher_creation_policy=creation,
        launcher=launcher,
        worker=worker,
        run_policy=_run_policy(spec.get("runPolicy")),
        chunked_graph=chunked,
        partition_transfer=transfer,
        storage=_storage(spec.get("storage")),
        elastic=_elastic(spec.get("elasticPolicy"), worker, modes.MODES[mode]),
        out_of_core=_out_of_core(spec.get("outOfCore"), modes.MODES[mode]),
    )
    validate_scheduling(job_spec)
    validate_elastic(job_spec)
    return job_spec


@dataclass(frozen=True)
class Finishing:
    """What a finished job still needs of its spec: ``cleanPodPolicy`` and
    ``runPolicy.ttlSecondsAfterFinished``."""

    clean_pod_policy: str = CLEAN_RUNNING
    ttl_seconds_after_finished: int | None = None


def finishing(obj: dict[str, Any]) -> Finishing:
    """A finished job's cleanPodPolicy and TTL, read leniently from the raw object: a value
    that does not parse takes its default (Running; no TTL), and nothing else of the spec is
    read. A job that finished under an older, looser API is cleaned up and deleted after its
    TTL even when its spec no longer passes :func:`parse_job`."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    clean = spec.get("cleanPodPolicy", CLEAN_RUNNING)
    run_policy = spec.get("runPolicy")
    ttl = run_policy.get("ttlSecondsAfterFinished") if isinstance(run_policy, dict) else None
    try:
        seconds = None if ttl is None else _int(ttl, "ttlSecondsAfterFinished", minimum=0)
    except SpecError:
        seconds = None
    return Finishing(
        clean_pod_policy=clean if clean in CLEAN_POD_POLICIES else CLEAN_RUNNING,
        ttl_seconds_after_finished=seconds,
    )


def parse_job(obj: dict[str, Any]) -> DGLJob:
    """Typed view of a raw DGLJob; raises :class:`SpecError` naming the offending field."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if "spec" not in obj:
        raise SpecError("spec", "is required")
    spec = parse_spec(obj["spec"])
    validate_name(name, spec)
    return DGLJob(
        namespace=str(meta.get("namespace") or ""),
        name=name,
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
        spec=spec,
        raw=obj,
    )
