"""The CRD: shape, printer columns, and that it accepts the seed and rejects malformed jobs;
and that it and the parser (dgljob.parse) agree: every malformed case is refused by both
(but the few only the parser can state), and every CEL rule and every ``raise SpecError`` of
the parser is what refuses at least one case."""

from __future__ import annotations

import ast
import copy
import re
import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import (
    API_VERSION,
    GROUP,
    KIND,
    VERSION,
    ElasticPolicy,
    SpecError,
    parse_job,
)
from controller.features.elastic import STATUS_FIELDS
from dgljob import parse
from podcontract import STATUS_PROGRESS_DETAIL
from podcontract.progress import ETA, MAX_METRICS, METRICS, ProgressDetail
from podcontract.quantity import parse_quantity
from soak.kinds import KINDS
from soak.kinds import manifest as soak_manifest
from tests.controller.crd_validate import Validator, apply_defaults, load_crd, version_schema
from tests.support.dgljobs import load_fixture
from tests.support.malformed import CASES, CRD_CASES, Case, apply_case
from tests.support.paths import CRD_PATH, EXAMPLE_MANIFESTS, REPO

VERSION_LINE = re.compile(r"^version\s*=\s*(\S+)", re.M)  # setup.cfg's: the images' tag


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return load_crd(CRD_PATH)


@pytest.fixture(scope="module")
def validator(crd: dict[str, Any]) -> Validator:
    return Validator(crd)


def test_identity(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"dgljobs.{GROUP}"
    assert spec["group"] == GROUP and spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == KIND
    assert spec["names"]["shortNames"] == ["dglj"]
    assert "all" in spec["names"]["categories"]
    (version,) = spec["versions"]
    assert version["name"] == VERSION and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    assert API_VERSION == "qihoo.net/v1alpha1"


def test_printer_columns(crd: dict[str, Any]) -> None:
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    cols = {c["name"]: c["jsonPath"] for c in columns}
    assert cols["Phase"] == ".status.phase"
    assert cols["Workers"] == ".status.replicaStatuses.Worker.ready"
    assert cols["Scale"] == ".status.elastic.scale"
    assert cols["Age"] == ".metadata.creationTimestamp"
    names = [c["name"] for c in columns]
    assert names[names.index("Workers") + 1] == "Scale"
    (scale,) = (c for c in columns if c["name"] == "Scale")
    assert scale["type"] == "string" and scale.get("priority", 0) == 0
    assert scale["description"] == "elastic jobs: workers training / desired"
    assert cols["ETA"] == f".status.{STATUS_PROGRESS_DETAIL}.{ETA}"
    assert names[names.index("Progress") + 1] == "ETA"


def test_progress_detail_schema_holds_what_dglrun_writes(crd: dict[str, Any]) -> None:
    """The CRD's status.progressDetail names exactly the fields podcontract.progress writes
    (one spelling for the writer and the schema)."""
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    props = status["properties"][STATUS_PROGRESS_DETAIL]["properties"]
    assert set(props) == set(ProgressDetail().as_status())
    assert props[METRICS]["maxProperties"] == MAX_METRICS


def test_the_schema_takes_the_detail_dglrun_writes_and_refuses_a_string_epoch(
    validator: Validator,
) -> None:
    """What dglrun patches (its absent estimates left out, as a merge patch does) is valid,
    epochs included; a string where an epoch count belongs is refused at admission."""
    seed = load_fixture("seed_dgljob.yaml")
    d = ProgressDetail(5, 5, "train", 90, 30, 30, {"loss": 0.4}, epochs_done=3, epochs=8)
    written = {k: v for k, v in d.as_status().items() if v is not None}
    assert validator.validate({**seed, "status": {STATUS_PROGRESS_DETAIL: written}}) == []
    bad = {**seed, "status": {STATUS_PROGRESS_DETAIL: dict(written, epochsDone="3")}}
    assert any("epochsDone" in e for e in validator.validate(bad)), "refused, naming it"


def _walk(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(schema, dict):
        out.append((path, schema))
        for k, v in schema.items():
            out += _walk(v, f"{path}/{k}")
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            out += _walk(v, f"{path}/{i}")
    return out


def test_schema_is_structural(crd: dict[str, Any]) -> None:
    schema = version_schema(crd)
    for path, node in _walk(schema):
        assert "$ref" not in node, f"{path}: $ref is not allowed in a CRD schema"
        if "properties" in node and not path.endswith("/properties"):
            assert node.get("type") == "object", f"{path}: properties need type object"
        if "properties" in node and isinstance(node.get("additionalProperties"), dict):
            raise AssertionError(f"{path}: properties and additionalProperties together")


def test_enums_and_defaults(crd: dict[str, Any]) -> None:
    spec = version_schema(crd)["properties"]["spec"]["properties"]
    assert spec["partitionMode"]["default"] == "DGL-API"
    assert spec["partitionMode"]["enum"] == ["DGL-API", "Skip", "ParMETIS", "DistParMETIS"]
    assert spec["cleanPodPolicy"]["default"] == "Running"
    assert set(spec["cleanPodPolicy"]["enum"]) == {"Running", "All", "None"}
    assert spec["slotsPerWorker"]["default"] == 1
    rp = spec["runPolicy"]["properties"]
    assert set(rp) == {
        "ttlSecondsAfterFinished",
        "activeDeadlineSeconds",
        "backoffLimit",
        "suspend",
        "schedulingPolicy",
    }
    # mpi-operator v2beta1's names, so its users' manifests carry over
    assert set(rp["schedulingPolicy"]["properties"]) == {
        "minAvailable",
        "queue",
        "priorityClass",
        "scheduleTimeoutSeconds",
    }
    tpl = spec["dglReplicaSpecs"]["properties"]["Worker"]["properties"]["template"]
    assert tpl["x-kubernetes-preserve-unknown-fields"] is True


def test_seed_example_is_accepted_unchanged(validator: Validator) -> None:
    seed = load_fixture("seed_dgljob.yaml")
    assert validator.validate(seed) == []
    parse_job({**seed, "metadata": {**seed["metadata"], "uid": "u"}})


def test_example_manifest_in_repo_is_the_seed_with_training_settings(
    validator: Validator,
) -> None:
    """The example is the proposal's, except its launcher's arguments (epochs, batch size and
    METIS balancing tuned so that `make demo` converges) and its image's tag (the one the build
    gives, setup.cfg's version, not the proposal's v0.1.0); it validates as well."""
    example = yaml.safe_load((REPO / "examples" / "graphsage" / "dgljob.yaml").read_text())
    seed = load_fixture("seed_dgljob.yaml")
    path = ("spec", "dglReplicaSpecs", "Launcher", "template", "spec", "containers")
    ex_c: Any = example  # the nested maps and lists of YAML along path
    seed_c: Any = seed
    for key in path:
        ex_c, seed_c = ex_c[key], seed_c[key]
    ex_args, seed_args = ex_c[0].pop("args"), seed_c[0].pop("args")
    version = VERSION_LINE.search((REPO / "setup.cfg").read_text())
    assert version
    for job, tag in ((example, version.group(1)), (seed, "v0.1.0")):
        for replica in job["spec"]["dglReplicaSpecs"].values():
            for container in replica["template"]["spec"]["containers"]:
                assert container.pop("image") == f"dgloperator/graphsage:{tag}"
    assert example == seed
    assert ex_args[ex_args.index("--num-epochs") + 1] == "2"
    assert ex_args[ex_args.index("--batch-size") + 1] == "128"
    assert {"--balance-train", "--balance-edges"} <= set(ex_args)
    assert set(seed_args) - {"1", "1000"} <= set(ex_args)
    assert (
        validator.validate(
            yaml.safe_load((REPO / "examples" / "graphsage" / "dgljob.yaml").read_text())
        )
        == []
    )


def test_full_featured_job_is_accepted(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"].update(
        slotsPerWorker=2,
        cleanPodPolicy="All",
        launcherCreationPolicy="AtStartup",
        runPolicy={
            "ttlSecondsAfterFinished": 60,
            "activeDeadlineSeconds": 3600,
            "backoffLimit": 3,
            "suspend": True,
        },
    )
    job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {"a": "b"}
    assert validator.validate(job) == []


def test_skip_mode_without_workers_is_accepted(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"]["partitionMode"] = "Skip"
    del job["spec"]["dglReplicaSpecs"]["Worker"]
    assert validator.validate(job) == []


def test_at_least_twenty_malformed_cases() -> None:
    assert len(CASES) >= 20
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CRD_CASES, ids=[c.id for c in CRD_CASES])
def test_crd_rejects_malformed(validator: Validator, case: Case) -> None:
    errors = validator.validate(apply_case(load_fixture("seed_dgljob.yaml"), case))
    assert errors, f"{case.id} was accepted"
    assert any(case.field in e for e in errors), f"{case.id}: no error names {case.field}: {errors}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_controller_rejects_malformed(case: Case) -> None:
    raw = apply_case(load_fixture("seed_dgljob.yaml"), case)
    raw.setdefault("metadata", {})["uid"] = "u"
    with pytest.raises(SpecError) as err:
        parse_job(raw)
    assert case.field in str(err.value), f"{case.id}: {err.value} does not name {case.field}"


def test_unknown_field_is_rejected(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"]["cleanPodPolicyy"] = "All"
    assert any("spec.cleanPodPolicyy: unknown field" in e for e in validator.validate(job))


@pytest.mark.parametrize(
    ("mode", "layout"),
    [("ParMETIS", "Shared"), ("DistParMETIS", "Shared"), ("DistParMETIS", "PerWorker")],
)
def test_parmetis_modes_with_a_chunked_graph_are_accepted(
    validator: Validator, mode: str, layout: str
) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"].update(partitionMode=mode, chunkedGraph={"path": "/data/g", "layout": layout})
    assert validator.validate(job) == []
    parsed = parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}})
    assert parsed.spec.chunked_graph is not None
    assert (parsed.spec.chunked_graph.path, parsed.spec.chunked_graph.layout) == ("/data/g", layout)
    assert parsed.spec.mode.partitioner == (mode == "ParMETIS")


def test_chunked_graph_layout_defaults_to_shared(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"].update(partitionMode="ParMETIS", chunkedGraph={"path": "/data/g"})
    assert validator.validate(job) == []
    job["metadata"]["uid"] = "u"
    cg = parse_job(job).spec.chunked_graph
    assert cg is not None and cg.layout == "Shared"
    schema = version_schema(load_crd(CRD_PATH))["properties"]["spec"]["properties"]
    assert schema["chunkedGraph"]["properties"]["layout"]["default"] == "Shared"


def test_longest_accepted_names(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["metadata"]["name"] = "j" * 51
    job["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = 10000
    assert validator.validate(job) == []
    parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}})
    skip = load_fixture("seed_dgljob.yaml")
    skip["metadata"]["name"] = "s" * 54
    skip["spec"]["partitionMode"] = "Skip"
    del skip["spec"]["dglReplicaSpecs"]["Worker"]
    assert validator.validate(skip) == []


def test_scheduling_policy_is_parsed_with_mpi_operator_names(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"]["runPolicy"] = {
        "schedulingPolicy": {
            "minAvailable": 3,
            "queue": "team-a",
            "priorityClass": "high",
            "scheduleTimeoutSeconds": 120,
        }
    }
    assert validator.validate(job) == []
    policy = parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}})
    sp = policy.spec.run_policy.scheduling_policy
    assert (sp.min_available, sp.queue, sp.priority_class, sp.schedule_timeout_seconds) == (
        3,
        "team-a",
        "high",
        120,
    )


def test_elastic_job_is_accepted_with_defaults(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"].update(storage={"claimName": "results"}, elasticPolicy={})
    assert validator.validate(job) == []
    defaulted = apply_defaults(version_schema(load_crd(CRD_PATH)), job)
    # maxReplicas has no schema default: it is the Worker replicas (2 in the seed)
    assert defaulted["spec"]["elasticPolicy"] == {
        "minReplicas": 1,
        "settleSeconds": 30,
        "cooldownSeconds": 60,
    }
    policy = parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}}).spec.elastic
    assert policy == ElasticPolicy(
        min_replicas=1, max_replicas=2, settle_seconds=30, cooldown_seconds=60
    )


@pytest.mark.parametrize(
    ("policy", "replicas"),
    [
        ({"minReplicas": 2, "maxReplicas": 4}, 2),
        ({"minReplicas": 1, "maxReplicas": 4}, 4),
        ({"minReplicas": 3}, 3),
        ({"maxReplicas": 10000, "settleSeconds": 0, "cooldownSeconds": 86400}, 1),
    ],
)
def test_elastic_bounds_that_are_accepted(
    validator: Validator, policy: dict[str, int], replicas: int
) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"].update(storage={"claimName": "results"}, elasticPolicy=dict(policy))
    job["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = replicas
    assert validator.validate(job) == []
    parsed = parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}}).spec
    assert parsed.elastic is not None
    assert parsed.elastic.max_replicas == policy.get("maxReplicas", replicas)
    assert parsed.workers == parsed.elastic.max_replicas


def test_elastic_with_shared_chunks_is_accepted(validator: Validator) -> None:
    job = load_fixture("seed_dgljob.yaml")
    job["spec"].update(
        partitionMode="DistParMETIS",
        chunkedGraph={"path": "/data/g"},
        storage={"claimName": "results"},
        elasticPolicy={"minReplicas": 1},
    )
    assert validator.validate(job) == []
    parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}})


def test_elastic_status_is_in_the_schema(crd: dict[str, Any]) -> None:
    status = version_schema(crd)["properties"]["status"]
    elastic = status["properties"]["elastic"]["properties"]
    assert set(elastic) == set(STATUS_FIELDS), "every field the controller writes (no pruning)"
    assert set(elastic["lastRescale"]["properties"]) == {"reason", "from", "to", "time"}
    assert "Rescaling" in status["properties"]["phase"]["description"]


@pytest.mark.parametrize(
    ("file", "policy", "workers"),
    [
        ("dgljob-elastic.yaml", ElasticPolicy(1, 3, 30, 60), 3),
        ("dgljob-elastic-distparmetis.yaml", ElasticPolicy(2, 3, 10, 10), 3),
    ],
)
def test_elastic_examples_are_accepted(
    validator: Validator, file: str, policy: ElasticPolicy, workers: int
) -> None:
    path = REPO / "examples" / "graphsage" / file
    example = yaml.safe_load(path.read_text())
    assert validator.validate(example) == []
    example["metadata"]["uid"] = "u"
    parsed = parse_job(example).spec
    assert parsed.elastic == policy
    assert parsed.storage is not None and parsed.workers == workers


@pytest.mark.parametrize(
    "path", EXAMPLE_MANIFESTS, ids=[p.relative_to(REPO).as_posix() for p in EXAMPLE_MANIFESTS]
)
def test_every_example_manifest_is_admitted_by_the_crd_and_parsed(
    validator: Validator, path: Path
) -> None:
    """What a user applies from examples/: the CRD's schema and rules admit it as it is (no
    unknown field, every CEL rule), and the operator's parser takes it."""
    for doc in yaml.safe_load_all(path.read_text()):
        assert validator.validate(copy.deepcopy(doc)) == [], path
        doc["metadata"]["uid"] = "u"
        parse_job(doc)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_job_the_soak_submits_is_admitted_by_the_crd(validator: Validator, kind: str) -> None:
    raw = soak_manifest(kind, "team-a", f"{kind}-000", "team-a", "soak-low")
    assert validator.validate(raw) == [], kind


@pytest.mark.parametrize("limit", ["20Gi", "500G", "1.5Ti", "1000000", "0"])
def test_a_cache_limit_is_accepted_by_both_and_is_a_size_for_dglrun(
    crd: dict[str, Any], validator: Validator, limit: str
) -> None:
    """spec.storage.cacheLimit: the CRD's pattern is the parser's, and what both accept is
    a quantity dglrun reads (podcontract.quantity)."""
    storage = version_schema(crd)["properties"]["spec"]["properties"]["storage"]["properties"]
    assert storage["cacheLimit"]["pattern"] == parse.CACHE_LIMIT.pattern
    assert "default" not in storage["cacheLimit"]  # (dglrun's: half the filesystem)
    job = load_fixture("seed_dgljob.yaml")
    job["spec"]["storage"] = {"claimName": "results", "cacheLimit": limit}
    assert validator.validate(job) == []
    st = parse_job({**job, "metadata": {**job["metadata"], "uid": "u"}}).spec.storage
    assert st is not None and st.cache_limit == limit
    assert st.to_dict() == {"claimName": "results", "cacheLimit": limit}
    assert parse_quantity(limit) >= 0


@pytest.mark.parametrize("case", [c for c in CASES if not c.crd], ids=lambda c: c.id)
def test_what_only_the_parser_refuses_the_crd_admits(validator: Validator, case: Case) -> None:
    """A case marked parser-only is one the CRD cannot state: it admits it."""
    assert validator.validate(apply_case(load_fixture("seed_dgljob.yaml"), case)) == []


def cel_rules(crd: dict[str, Any]) -> list[dict[str, Any]]:
    """The CEL rules of the schema that judge one object (not the transition rules, which
    compare with oldSelf: tests/apiserver/test_admission.py updates jobs for those)."""
    return [
        rule
        for _, node in _walk(version_schema(crd))
        for rule in node.get("x-kubernetes-validations") or []
        if "oldSelf" not in rule["rule"]
    ]


def test_every_cel_rule_refuses_some_case(crd: dict[str, Any], validator: Validator) -> None:
    """Each CEL rule is the one that refuses at least one malformed case: a new rule needs a
    case (which the parser must refuse too, naming the same field)."""
    errors = [
        e
        for case in CRD_CASES
        for e in validator.validate(apply_case(load_fixture("seed_dgljob.yaml"), case))
    ]
    rules = cel_rules(crd)
    unhit = [r["rule"] for r in rules if not any(r["message"] in e for e in errors)]
    assert len(rules) >= 19 and not unhit, f"no malformed case is refused by: {unhit}"


def raise_sites() -> set[int]:
    """The lines of dgljob/parse.py that raise a SpecError."""
    tree = ast.parse(Path(parse.__file__).read_text())
    return {
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and isinstance(node.exc.func, ast.Name)
        and node.exc.func.id == "SpecError"
    }


def raised_at(raw: dict[str, Any]) -> int:
    """The line of dgljob/parse.py whose ``raise`` refused ``raw``."""
    with pytest.raises(SpecError) as err:
        parse_job(raw)
    frames = traceback.extract_tb(err.value.__traceback__)
    return [f for f in frames if f.filename == parse.__file__][-1].lineno or 0


def test_every_parser_check_refuses_some_case() -> None:
    """Each ``raise SpecError`` of the parser is what refuses at least one malformed case: a
    new check needs a case (which the CRD must refuse too, unless marked parser-only)."""
    hit = set()
    for case in CASES:
        raw = apply_case(load_fixture("seed_dgljob.yaml"), case)
        raw.setdefault("metadata", {})["uid"] = "u"
        hit.add(raised_at(raw))
    sites = raise_sites()
    assert len(sites) >= 30 and not sites - hit, f"no case is refused at lines {sites - hit}"
