"""The pod contract end to end (podcontract): the pods the controller builds for real DGLJobs
(the seed's, and the examples' storage, ParMETIS and DistParMETIS jobs), read by the programs
that run in them with their own parsing code: dglrun's options (launcher.options.parse, what
``dglrun`` itself runs), its hostfile parser, watcher-loop's and kubectl-download's configs.

A pod is taken as its containers see it: the env the kubelet gives them, and the files their
volume mounts put in place (the job's ConfigMap items, the transfer token Secret); a volume
mounted at a folder (kubectl's emptyDir, the storage's claim, the dataset volume) is a folder.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from controller.api import DGLJob, parse_job
from controller.builders import BuildOptions
from controller.builders.desired import Desired, desired
from controller.builders.meta import CONFIG_VOLUME
from controller.features.storage import results_location
from controller.features.transfer import DGLRUN_TRANSFER
from controller.status.conditions import (
    REASON_FILE_REFUSED,
    REASON_MEMORY_PLAN,
    REASON_OOM_KILLED,
)
from controller.status.failures import PodFailure
from dgljob.modes import MODES, SKIP
from kubectl_download.config import load_config as kubectl_download_config
from launcher.options import Options, PartitionTransfer, build_parser, parse
from launcher.partition import mpirun
from launcher.plans import memory as memplan
from launcher.report.progress import ProgressTarget
from launcher.workers import oom, refusal
from launcher.workers.hostfile import parse_hostfile
from podcontract import (
    CHUNKED_LAYOUTS,
    DATASET,
    DGL_PORT,
    DGL_PORT_COUNT,
    PARTITION_MODES,
    PHASE_LAUNCHER_WORKLOAD,
    PHASE_PARTITIONER,
    REFUSED_EXIT_CODE,
    STORAGE_DIR,
    TRANSFER_READY_PATH,
    TRANSFERS,
    WATCHER_PARTITIONER,
    WATCHER_WORKERS,
)
from podcontract.quantity import parse_quantity
from podcontract.settings import (
    CACHE_LIMIT,
    CPU_LIMIT,
    DGLRUN_SETTINGS,
    OPERATOR,
    PARTFILE_PATH,
    Setting,
)
from podprogram.flagfields import every_flag, values
from tests.support.dgljobs import load_fixture
from tests.support.paths import EXAMPLE_MANIFESTS, REPO
from watcher_loop.config import load_config as watcher_loop_config

UID = "0123abcd-4567-89ef-0123-456789abcdef"
TOKEN = "the-jobs-transfer-token"
NODE_CPUS = "3"  # what the kubelet resolves a resourceFieldRef limits.cpu without a limit to


def _example(path: Path) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text())
    assert isinstance(raw, dict)
    return raw


def _named(stem: str) -> dict[str, Any]:
    (path,) = [p for p in EXAMPLE_MANIFESTS if p.stem == stem]
    return _example(path)


def _seed(**spec: Any) -> dict[str, Any]:
    raw = load_fixture("seed_dgljob.yaml")
    raw["spec"].update(spec)
    return raw


def _skip() -> dict[str, Any]:
    raw = _seed(partitionMode="Skip")
    del raw["spec"]["dglReplicaSpecs"]["Worker"]
    return raw


def _with(raw: dict[str, Any], transfer: str) -> dict[str, Any]:
    raw["spec"]["partitionTransfer"] = transfer
    return raw


def _limited(raw: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    worker = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {"memory": "6Gi", "cpu": "2"}}
    return raw


def _example_key(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


# Every manifest under examples/ (by its path: a new one joins by being there), and variants
# of the seed's and the examples' the contract must also hold for.
JOBS: dict[str, Callable[[], dict[str, Any]]] = {
    **{_example_key(p): partial(_example, p) for p in EXAMPLE_MANIFESTS},
    "seed": lambda: _seed(),
    "seed-kubectlcp": lambda: _seed(partitionTransfer="KubectlCp"),
    "seed-limited": lambda: _limited(_seed()),
    "storage-shared": lambda: _seed(
        storage={
            "claimName": "results",
            "path": "team/g",
            "sharePartitions": True,
            "cacheLimit": "20Gi",
        }
    ),
    "parmetis-kubectlcp": lambda: _with(_named("dgljob-parmetis"), "KubectlCp"),
    "distparmetis-limited": lambda: _limited(_named("dgljob-distparmetis")),
    "skip": _skip,
    "out-of-core": lambda: _seed(outOfCore={"enabled": True, "pageCacheFraction": 0.3}),
}
STORAGE = "examples/graphsage/dgljob-storage.yaml"


def _job(name: str) -> DGLJob:
    raw = JOBS[name]()
    raw["metadata"]["uid"] = UID
    return parse_job(raw)


WITH_WORKERS = [name for name in JOBS if MODES[_job(name).spec.partition_mode].workers]
WITH_PARTITIONER = [name for name in JOBS if MODES[_job(name).spec.partition_mode].partitioner]


def test_every_example_manifest_is_one_dgljob_the_contract_is_checked_for() -> None:
    assert EXAMPLE_MANIFESTS, "no manifest under examples/"
    for path in EXAMPLE_MANIFESTS:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(docs) == 1, f"{path}: {len(docs)} documents (the contract checks one DGLJob)"
        assert docs[0].get("kind") == "DGLJob", f"{path}: kind {docs[0].get('kind')!r}"
        assert _example_key(path) in JOBS


def _ip_pod(name: str, ip: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"podIP": ip}}


def _build(job: DGLJob) -> Desired:
    """Every child of ``job``, the ConfigMap as it is once every pod has an IP."""
    pods = {n: _ip_pod(n, f"10.0.1.{i}") for i, n in enumerate(job.worker_names())}
    pods[job.partitioner_name] = _ip_pod(job.partitioner_name, "10.0.2.1")
    pods[job.launcher_name] = _ip_pod(job.launcher_name, "10.0.2.2")
    return desired(job, BuildOptions(), pods, token=TOKEN)


@dataclass
class Seen:
    """What one container of a pod sees."""

    container: dict[str, Any]
    env: dict[str, str]
    files: dict[str, tuple[str, int | None]]  # path -> (content, mode)
    folders: dict[str, dict[str, Any]]  # mount path -> its volume


def _env(container: dict[str, Any]) -> dict[str, str]:
    """The container's env as its process gets it (the downward API's CPU limit resolved)."""
    out = {}
    for e in container.get("env") or []:
        if "value" in e:
            out[e["name"]] = e["value"]
            continue
        ref = e["valueFrom"]["resourceFieldRef"]
        assert ref == {"containerName": container["name"], "resource": "limits.cpu", "divisor": "1"}
        limits = (container.get("resources") or {}).get("limits") or {}
        out[e["name"]] = str(limits.get("cpu", NODE_CPUS))
    return out


def _seen(pod: dict[str, Any], d: Desired, container: dict[str, Any] | None = None) -> Seen:
    container = container or pod["spec"]["containers"][0]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    data = (d.config_map or {}).get("data") or {}
    files: dict[str, tuple[str, int | None]] = {}
    folders: dict[str, dict[str, Any]] = {}
    for mount in container.get("volumeMounts") or []:
        volume, at = volumes[mount["name"]], mount["mountPath"]
        if "configMap" in volume and mount["name"] == CONFIG_VOLUME:  # the operator's
            assert d.config_map is not None
            assert volume["configMap"]["name"] == d.config_map["metadata"]["name"]
            for item in volume["configMap"]["items"]:
                files[f"{at}/{item['path']}"] = (data[item["key"]], item.get("mode"))
        elif "secret" in volume:
            assert (
                d.transfer and volume["secret"]["secretName"] == d.transfer[0]["metadata"]["name"]
            )
            for item in volume["secret"]["items"]:
                files[f"{at}/{item['path']}"] = (TOKEN, item.get("mode"))
        else:  # (also a template's own ConfigMap, e.g. examples/minimal's script)
            folders[at] = volume
    return Seen(container, _env(container), files, folders)


def _dglrun(seen: Seen) -> Options:
    """dglrun's options, as the container's command starts it."""
    assert seen.container["command"] == ["dglrun"]
    return parse(seen.container["args"], env=seen.env)


def _dglrun_in(name: str, role: str) -> tuple[DGLJob, Desired, Seen, Options]:
    """Job ``name``, its children, and what the dglrun of its ``role`` pod sees and parses."""
    job = _job(name)
    d = _build(job)
    pod = d.launcher if role == "launcher" else d.partitioner
    assert pod is not None
    seen = _seen(pod, d)
    return job, d, seen, _dglrun(seen)


def _folder(seen: Seen, path: str | Path) -> tuple[str, dict[str, Any]]:
    """The mount a path is in (its mount path and volume); fails if none holds it."""
    p = PurePosixPath(path)
    for at, volume in seen.folders.items():
        if p == PurePosixPath(at) or PurePosixPath(at) in p.parents:
            return at, volume
    raise AssertionError(f"{path} is in no volume mounted in {seen.container['name']}")


def _init(pod: dict[str, Any], name: str) -> dict[str, Any]:
    inits: dict[str, dict[str, Any]] = {
        c["name"]: c for c in pod["spec"].get("initContainers") or []
    }
    assert name in inits, f"{pod['metadata']['name']} has no init container {name}"
    return inits[name]


def _worker_memory_limit(job: DGLJob) -> int | None:
    """What the memory plan should check against: the Worker template's limit."""
    assert job.spec.worker is not None
    container = job.spec.worker.template["spec"]["containers"][0]
    limit = container.get("resources", {}).get("limits", {}).get("memory")
    return None if limit is None else memplan.parse_bytes(limit)


def _pod_files(seen: Seen, path: str) -> list[str]:
    """The pod names a mounted hostfile-format file lists, by dglrun's own parser."""
    assert path in seen.files, f"{path} is not mounted in {seen.container['name']}"
    content, mode = seen.files[path]
    assert mode is not None and mode & 0o444 == 0o444
    return [h.name for h in parse_hostfile(content, path)]


# -- the launcher pod ----------------------------------------------------------------------


@pytest.mark.parametrize("name", WITH_WORKERS)
def test_the_launchers_dglrun_reads_what_the_operator_meant(name: str) -> None:
    job, d, seen, opts = _dglrun_in(name, "launcher")
    spec = job.spec
    assert opts.phase == ""
    assert opts.job == ProgressTarget(job.name, job.uid, job.namespace)
    assert seen.env[OPERATOR.env] == OPERATOR.write(True)
    assert opts.partition_mode == spec.partition_mode
    if spec.chunked_graph is not None:
        assert (opts.chunked_graph, opts.chunked_layout) == (
            spec.chunked_graph.path,
            spec.chunked_graph.layout,
        )
    # the workers: the hostfile it reads lists them all, in order, at the DGL port
    hosts = parse_hostfile(seen.files[opts.hostfile][0], opts.hostfile)
    assert [h.name for h in hosts] == job.worker_names() and len(hosts) == spec.workers
    assert {h.port for h in hosts} == {DGL_PORT} and {h.slots for h in hosts} == {1}
    # kubectl exec through kubexec.sh, with the kubectl kubectl-download installs
    kubexec, mode = seen.files[opts.kubexec]
    assert mode == 0o555 and f"{opts.kubectl} exec " in kubexec
    at, volume = _folder(seen, opts.kubectl)
    download = _init(d.launcher, "kubectl-download")
    assert {"name": volume["name"], "mountPath": at} in download["volumeMounts"]
    assert kubectl_download_config(_env(download)).target == Path(opts.kubectl)
    assert opts.worker_memory_limit == _worker_memory_limit(job)
    # watcher-loop waits for the workers the hostfile lists, read from where it is mounted
    watch = _init(d.launcher, WATCHER_WORKERS)
    config = watcher_loop_config(_env(watch), namespace_file=Path("/nonexistent"))
    assert str(config.file) == opts.hostfile and config.expected_pods == spec.workers
    assert _pod_files(_seen(d.launcher, d, watch), opts.hostfile) == job.worker_names()
    assert config.namespace == job.namespace


@pytest.mark.parametrize("name", WITH_PARTITIONER)
def test_the_launcher_gets_the_parts_the_way_the_partitioner_gives_them(name: str) -> None:
    job, d, seen, opts = _dglrun_in(name, "launcher")
    assert opts.transfer.mode == DGLRUN_TRANSFER[job.spec.partition_transfer]
    watch = _init(d.launcher, WATCHER_PARTITIONER)
    config = watcher_loop_config(_env(watch), namespace_file=Path("/nonexistent"))
    assert config.expected_pods == 1
    if job.spec.pulls_partitions:
        # HTTP: the partfile names the partitioner; the token is where the workers' pulls
        # (started with this dglrun's --token-file) and the server find it
        assert _pod_files(seen, opts.transfer.partfile) == [job.partitioner_name]
        assert seen.env[PARTFILE_PATH.env] == opts.transfer.partfile == str(config.file)
        assert seen.files[opts.transfer.token_file][0] == TOKEN
        for worker in d.workers:
            assert _seen(worker, d).files[opts.transfer.token_file][0] == TOKEN
        assert config.mode.value == "served"  # (Ready, or Succeeded once it has served)
    else:
        # KubectlCp: the partitioner copies the dataset into the init container that waits
        # for it, which mounts the volume the launcher's dglrun reads from
        dataset = str(opts.workspace / DATASET)
        at, volume = _folder(seen, dataset)
        assert at == dataset
        assert {"name": volume["name"], "mountPath": dataset} in watch["volumeMounts"]
        assert config.mode.value == "finished"


@pytest.mark.parametrize("name", [STORAGE, "storage-shared"])
def test_every_dglrun_keeps_the_job_s_files_where_status_results_says(name: str) -> None:
    job = _job(name)
    d = _build(job)
    st = job.spec.storage
    assert st is not None and d.partitioner is not None
    roots = set()
    for pod in (d.launcher, d.partitioner):
        seen = _seen(pod, d)
        opts = _dglrun(seen)
        assert opts.storage is not None
        at, volume = _folder(seen, opts.storage.root)
        assert at == STORAGE_DIR
        # what dglrun requires to exist is the claim's mount: spec.storage.path it makes
        assert opts.storage.mount == Path(at)
        assert volume["persistentVolumeClaim"]["claimName"] == job.claim_name
        assert opts.storage.run == job.run_name
        assert opts.storage.share_partitions is st.share_partitions
        # spec.storage.cacheLimit as dglrun reads it, in bytes (None: dglrun's own default)
        want = int(parse_quantity(st.cache_limit)) if st.cache_limit else None
        assert opts.storage.cache_limit == want
        assert (want is not None) is (name == "storage-shared")
        inside = opts.storage.output.relative_to(STORAGE_DIR).as_posix()
        assert results_location(job) == f"{job.claim_name}:/{inside}"
        roots.add(opts.storage.root)
    assert len(roots) == 1
    # the trainers write checkpoints and results there: every worker mounts it at the same path
    for worker in d.workers:
        assert _folder(_seen(worker, d), next(iter(roots)))[0] == STORAGE_DIR


def test_skip_mode_trains_in_the_launcher_alone() -> None:
    job = _job("skip")
    raw = _skip()
    raw["metadata"]["uid"] = UID
    raw["spec"]["storage"] = {"claimName": "results"}
    for j in (job, parse_job(raw)):
        d = _build(j)
        seen = _seen(d.launcher, d)
        opts = _dglrun(seen)
        assert opts.phase == PHASE_LAUNCHER_WORKLOAD and opts.job == ProgressTarget()
        if j.spec.storage is not None:
            assert opts.storage is not None and opts.storage.run == j.run_name
            assert _folder(seen, opts.storage.root)[0] == STORAGE_DIR
        else:
            assert opts.storage is None


# -- the partitioner pod --------------------------------------------------------------------


@pytest.mark.parametrize("name", WITH_PARTITIONER)
def test_the_partitioners_dglrun_reads_what_the_operator_meant(name: str) -> None:
    job, _, seen, opts = _dglrun_in(name, "partitioner")
    assert opts.phase == PHASE_PARTITIONER
    assert opts.job == ProgressTarget(job.name, job.uid, job.namespace)
    assert opts.partition_mode == job.spec.partition_mode
    assert opts.transfer.mode == DGLRUN_TRANSFER[job.spec.partition_transfer]
    assert opts.worker_memory_limit == _worker_memory_limit(job)
    # the launcher it delivers to, or tells the workers' pulls are done
    assert _pod_files(seen, opts.leadfile) == [job.launcher_name]
    main = seen.container
    if job.spec.pulls_partitions:
        assert seen.files[opts.transfer.token_file][0] == TOKEN
        ports = {p["containerPort"] for p in main["ports"]}
        assert opts.transfer.port in ports
        probe = main["readinessProbe"]["httpGet"]
        assert probe == {"path": TRANSFER_READY_PATH, "port": opts.transfer.port}
    else:
        assert _folder(seen, opts.kubectl)[0] == str(Path(opts.kubectl).parent)
        assert f"{opts.kubectl} exec " in seen.files[opts.kubexec][0]
    if job.spec.chunked_graph is not None:
        # ParMETIS's default ranks: the pod's CPU limit, through the downward API
        limits = main.get("resources", {}).get("limits", {})
        assert mpirun.default_ranks(seen.env) == max(2, int(limits.get("cpu", NODE_CPUS)))
        assert CPU_LIMIT.env in seen.env


# -- the worker pods ------------------------------------------------------------------------


@pytest.mark.parametrize("name", WITH_WORKERS)
def test_the_workers_serve_dgl_where_the_hostfile_says(name: str) -> None:
    _, d, launcher, opts = _dglrun_in(name, "launcher")
    hosts = parse_hostfile(launcher.files[opts.hostfile][0])
    assert len(d.workers) == len(hosts)
    for worker, host in zip(d.workers, hosts, strict=True):
        assert worker["metadata"]["name"] == host.name
        seen = _seen(worker, d)
        assert seen.env[OPERATOR.env] == OPERATOR.write(True)
        ports = {p["containerPort"] for p in seen.container["ports"]}
        assert set(range(host.port, host.port + opts.training.processes.servers)) <= ports
        assert set(range(DGL_PORT, DGL_PORT + DGL_PORT_COUNT)) <= ports
        # DistParMETIS's ranks reach the other workers through the same kubexec.sh
        assert seen.files[opts.kubexec] == launcher.files[opts.kubexec]


# -- the names both sides accept, and what dglrun tells the operator -------------------------


def test_the_modes_layouts_and_transfers_dglrun_accepts_are_the_apis() -> None:
    assert set(PARTITION_MODES) == set(MODES) - {SKIP}
    layouts = {layout for mode in MODES.values() for layout in mode.layouts}
    assert layouts == set(CHUNKED_LAYOUTS)
    assert set(DGLRUN_TRANSFER.values()) == set(TRANSFERS)


# -- every variable the operator sets for dglrun: one declaration, read back as written -------

SETTINGS = {s.env: s for s in DGLRUN_SETTINGS}
# the variables dglrun reads: its options' (Options' fields declare them, by their path of
# field names), and ParMETIS's default ranks (mpirun.default_ranks; checked above)
OPTIONS = {fl.env: (path, fl) for path, fl in every_flag(Options) if fl.env in SETTINGS}
DGLRUN_READS = set(OPTIONS) | {CPU_LIMIT.env}
BASE_ARGS = ["-g", "g", "--train-entry-point", "t.py"]
# what a setting written by Setting.value_from holds in _written: no text, Kubernetes writes it
FROM_KUBERNETES = object()
# what dglrun makes of a value the operator writes, where it is not that value itself
MEANS: dict[str, Callable[[Any], Any]] = {CACHE_LIMIT.env: lambda q: int(parse_quantity(q))}


def test_every_setting_is_declared_once() -> None:
    assert len(SETTINGS) == len(DGLRUN_SETTINGS), "two settings with one variable"
    assert set(SETTINGS) <= DGLRUN_READS, "a setting no part of dglrun reads"
    by_field = [path for path, fl in every_flag(Options) if fl.env in SETTINGS]
    assert len(by_field) == len(OPTIONS), "two options read one variable"


def _at(found: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a path of field names (``("job", "uid")``: the job's uid)."""
    value: Any = found[path[0]]
    for name in path[1:]:
        value = getattr(value, name)
    return value


def _elastic_chosen(job: DGLJob) -> DGLJob:
    """An elastic job once its attempt's workers are chosen (the count is in the env)."""
    return dataclasses.replace(job, spec=dataclasses.replace(job.spec, members=(0, 1)))


def _written(monkeypatch: pytest.MonkeyPatch, jobs: list[DGLJob]) -> list[tuple[Setting[Any], Any]]:
    """Every (setting, value) the operator writes for ``jobs``' children."""
    written: list[tuple[Setting[Any], Any]] = []
    pair = Setting.pair

    def recording(self: Setting[Any], value: Any) -> tuple[str, str]:
        written.append((self, value))
        return pair(self, value)

    def from_kubernetes(self: Setting[Any], source: dict[str, Any]) -> dict[str, Any]:
        written.append((self, FROM_KUBERNETES))
        return value_from(self, source)

    value_from = Setting.value_from
    monkeypatch.setattr(Setting, "pair", recording)
    monkeypatch.setattr(Setting, "value_from", from_kubernetes)
    for job in jobs:
        _build(job)
    return written


def _all_jobs() -> list[DGLJob]:
    jobs = [_job(name) for name in JOBS]
    return jobs + [_elastic_chosen(j) for j in jobs if j.spec.elastic is not None]


@pytest.mark.parametrize("name", WITH_WORKERS)
def test_every_variable_the_operator_sets_for_dglrun_is_a_setting_dglrun_reads(name: str) -> None:
    job = _job(name)
    for j in (job, _elastic_chosen(job)) if job.spec.elastic else (job,):
        d = _build(j)
        for pod in (d.launcher, d.partitioner):
            if pod is None:
                continue
            ours = [n for n in _seen(pod, d).env if n.startswith("DGL_OPERATOR_")]
            assert ours, pod["metadata"]["name"]
            for variable in ours:
                assert variable in SETTINGS, f"{variable}: not declared in podcontract.settings"
                assert variable in DGLRUN_READS, f"{variable}: no option of dglrun reads it"


def test_what_the_operator_writes_reads_back_as_the_value_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each value the operator writes, read back by the setting and by dglrun's option that
    the setting gives its default to (through its parser, as a pod's env would)."""
    written = _written(monkeypatch, _all_jobs())
    monkeypatch.undo()
    assert {s.env for s, _ in written} == set(SETTINGS), "a setting no job writes"
    for setting, value in written:
        if value is FROM_KUBERNETES:
            continue
        text = setting.write(value)
        assert setting.read(text) == value, f"{setting.env}={text!r} reads back otherwise"
        if setting.env not in OPTIONS:
            continue
        path, fl = OPTIONS[setting.env]
        env = {setting.env: text}
        from_env = _at(values(Options, build_parser(env).parse_args(BASE_ARGS), env), path)
        want = MEANS.get(setting.env, lambda v: v)(value)
        assert from_env == want, f"dglrun reads {setting.env}={text!r} otherwise"
        if fl.names and fl.action != "store_true":
            # the variable is the flag's default: the flag given the same text says the same
            given = build_parser({}).parse_args([*BASE_ARGS, fl.name, text])
            assert _at(values(Options, given), path) == want


def test_an_env_path_moves_the_file_dglrun_reads() -> None:
    """The operator's paths are dglrun's defaults; its env names move them."""
    base = ["-g", "g", "--train-entry-point", "t.py"]
    moved = parse(base, env={PARTFILE_PATH.env: "/elsewhere/partfile"})
    assert moved.transfer.partfile == "/elsewhere/partfile"
    assert parse(base, env={}).transfer.partfile == PartitionTransfer.partfile


def test_dglruns_memory_failures_are_what_the_operator_recognises() -> None:
    """A refusal of the memory plan and a process killed for memory, as dglrun's termination
    message says them, become the condition reasons the operator sets."""
    size = memplan.GraphSize(nodes=2_449_029, edges=123_718_280, node_bytes=412)
    one_each = memplan.Processes(servers=1, trainers=1)
    shape = memplan.Shape("DGL-API", workers=2, parts=2, ranks=1, processes=one_each)
    steps = memplan.plan(size, shape, 1 << 30)
    with pytest.raises(memplan.PlanError) as refused:
        memplan.check(size, shape, steps)
    killed = oom.Killed("p", "1 GiB").describe("trainer-0")
    for message, reason in ((str(refused.value), REASON_MEMORY_PLAN), (killed, REASON_OOM_KILLED)):
        failure = PodFailure("Launcher", "j-launcher", "dgl", 1, "Error", message)
        assert failure.condition_reason == reason


def test_dglruns_refusal_of_a_file_is_what_the_operator_fails_for_good() -> None:
    """A process that refused a file (REFUSED_EXIT_CODE, its last line naming it), as dglrun's
    termination message says it, becomes FileRefused, a failure no restart retries; the same
    line with another exit code is an ordinary failure."""
    line = "train_dist.py: error: [rank 0] checkpoint /dgl_storage/x/epoch-3.pt is refused: ..."
    said = refusal.describe(REFUSED_EXIT_CODE, line, "trainer 0 on w-0 (10.0.0.1)")
    assert said is not None
    failure = PodFailure("Launcher", "j-launcher", "dgl", 1, "Error", said)
    assert failure.condition_reason == REASON_FILE_REFUSED and failure.permanent
    assert failure.describe().startswith(line)
    assert refusal.describe(REFUSED_EXIT_CODE - 1, line, "trainer 0") is None
