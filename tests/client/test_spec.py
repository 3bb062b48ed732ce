"""The typed job (the operator's own model, built with new_job) and manifest loading of
dgl_operator.client (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dgl_operator.client import (
    ChunkedGraphSpec,
    DGLJob,
    MainContainer,
    ManifestError,
    RunPolicy,
    SpecError,
    StorageSpec,
    manifest,
    new_job,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "graphsage"


def test_the_seed_example_loads_unchanged() -> None:
    path = EXAMPLES / "dgljob.yaml"
    assert manifest(path) == yaml.safe_load(path.read_text())
    assert manifest(str(path))["metadata"]["name"] == "dgl-graphsage"


def test_typed_spec_names_the_common_fields_and_passes_the_rest_through() -> None:
    typed = new_job(
        "j",
        namespace="ns",
        launcher=MainContainer(image="img", command=["dglrun"], args=["--num-partitions", 2]),
        workers=4,
        partition_mode="DistParMETIS",
        storage=StorageSpec(
            claim_template={"spec": {"resources": {"requests": {"storage": "1Gi"}}}}
        ),
        run_policy=RunPolicy(ttl_seconds_after_finished=60, suspend=True),
        pod={"nodeSelector": {"pool": "gnn"}},
        extra={"cleanPodPolicy": "All"},
        chunked_graph=ChunkedGraphSpec("/data/g", layout="PerWorker"),
    )
    assert isinstance(typed, DGLJob) and typed.spec.workers == 4
    assert typed.spec.chunked_graph == ChunkedGraphSpec("/data/g", "PerWorker")
    assert typed.spec.clean_pod_policy == "All"  # (passed through extra, parsed)
    job = typed.raw
    assert manifest(typed) == job and manifest(typed) is not job
    assert job["apiVersion"] == "qihoo.net/v1alpha1" and job["kind"] == "DGLJob"
    assert job["metadata"] == {"name": "j", "namespace": "ns"}
    spec = job["spec"]
    assert spec["partitionMode"] == "DistParMETIS"
    assert spec["chunkedGraph"] == {"path": "/data/g", "layout": "PerWorker"}
    launcher = spec["dglReplicaSpecs"]["Launcher"]
    assert launcher["replicas"] == 1
    assert launcher["template"]["spec"]["containers"][0]["args"] == ["--num-partitions", "2"]
    assert launcher["template"]["spec"]["nodeSelector"] == {"pool": "gnn"}
    worker = spec["dglReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4
    assert worker["template"]["spec"]["containers"] == [{"name": "dgl", "image": "img"}]
    assert spec["storage"] == {
        "claimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    }
    assert spec["runPolicy"] == {"ttlSecondsAfterFinished": 60, "suspend": True}


def test_skip_mode_has_no_workers_and_extra_container_fields_merge() -> None:
    c = MainContainer(image="img", resources={"limits": {"memory": "1Gi"}},
                      extra={"volumeMounts": [{"name": "d", "mountPath": "/d"}]})  # fmt: skip
    spec = new_job("s", launcher=c, partition_mode="Skip").raw["spec"]
    assert set(spec["dglReplicaSpecs"]) == {"Launcher"}
    main = spec["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert main["resources"] == {"limits": {"memory": "1Gi"}}
    assert main["volumeMounts"] == [{"name": "d", "mountPath": "/d"}]


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"kind": "Pod", "metadata": {"name": "x"}}, "kind is 'Pod', not DGLJob"),
        (
            {"apiVersion": "kubeflow.org/v1", "metadata": {"name": "x"}},
            "apiVersion is 'kubeflow.org/v1'",
        ),
        ({"spec": {}}, "metadata.name is required"),
        (42, "create() takes a YAML path, a dict or a DGLJob, not int"),
    ],
)  # fmt: skip
def test_what_is_not_a_dgljob_is_named(job: object, message: str) -> None:
    with pytest.raises(ManifestError) as e:
        manifest(job)  # type: ignore[arg-type]
    assert message in str(e.value)


def test_a_file_is_named_in_its_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(
        ManifestError, match=r"empty\.yaml: expected exactly one DGLJob document, found 0"
    ):
        manifest(empty)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(
        ManifestError, match=r"list\.yaml: expected exactly one DGLJob document, found 0 and list"
    ):
        manifest(listing)
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    with pytest.raises(ManifestError, match=r"dir\.yaml: cannot read the manifest"):
        manifest(folder)


def test_a_typed_job_is_checked_by_the_operators_parser_naming_the_field() -> None:
    """What the operator would refuse is refused when the job is built: a memory limit of
    6K (K is no suffix), a gang size beside an elastic policy."""
    bad = MainContainer(image="img", resources={"limits": {"memory": "6K"}})
    with pytest.raises(SpecError) as e:
        new_job("q", launcher=MainContainer(image="img"), worker=bad, workers=2)
    assert e.value.field == (
        "spec.dglReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory"
    )
    assert "K is not a suffix: k is 1000, Ki is 1024" in str(e.value)


def test_a_cache_limit_round_trips_and_a_bad_one_is_refused_naming_the_field() -> None:
    kept = StorageSpec(claim_name="results", share_partitions=True, cache_limit="20Gi")
    typed = new_job("c", launcher=MainContainer(image="img"), workers=2, storage=kept)
    assert typed.raw["spec"]["storage"] == {
        "claimName": "results",
        "sharePartitions": True,
        "cacheLimit": "20Gi",
    }
    assert typed.spec.storage == kept
    for bad in ("20GB", "20 Gi", "1e9", "100m"):
        with pytest.raises(SpecError) as e:
            new_job("c", launcher=MainContainer(image="img"), workers=2,
                    storage=StorageSpec(claim_name="results", cache_limit=bad))  # fmt: skip
        assert e.value.field == "spec.storage.cacheLimit"
        assert f"{bad!r} is not a quantity of bytes such as 20Gi or 500G" in str(e.value)
