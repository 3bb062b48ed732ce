"""controller/machinery/objects.py: typed views of the raw JSON objects the sync reads."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from controller.api import parse_job
from controller.machinery import objects as ob
from tests.support.dgljobs import load_fixture
from tests.support.prerequisites import require

REPO = Path(__file__).resolve().parents[2]


def test_the_accessors_read_any_object_whatever_it_lacks() -> None:
    pod = {
        "metadata": {
            "name": "j-worker-0",
            "namespace": "ns",
            "uid": "u1",
            "labels": {"a": "b"},
            "annotations": {"x": "1"},
            "ownerReferences": [
                {"kind": "Other", "uid": "o"},
                {"kind": "DGLJob", "uid": "j", "controller": True},
            ],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "initContainerStatuses": [{"name": "i", "state": {"waiting": {"reason": "R"}}}],
            "containerStatuses": [{"name": "m", "state": {"terminated": {"exitCode": 3}}}],
        },
    }
    assert (ob.name(pod), ob.namespace(pod), ob.uid(pod), ob.key(pod)) == (
        "j-worker-0",
        "ns",
        "u1",
        "ns/j-worker-0",
    )
    assert ob.labels(pod) == {"a": "b"} and ob.annotation(pod, "x") == "1"
    assert ob.annotation(pod, "y") is None
    assert ob.owner_uid(pod) == "j" and ob.being_deleted(pod)
    assert ob.pod_spec(pod).get("nodeName") == "n1"
    (init,) = ob.container_statuses(pod, init=True)
    assert ob.waiting(init) == {"reason": "R"} and ob.terminated(init) is None
    (main,) = ob.container_statuses(pod)
    assert ob.terminated(main) == {"exitCode": 3} and ob.waiting(main) is None
    empties: list[dict[str, Any]] = [{}, {"metadata": None, "spec": "junk", "status": []}]
    for empty in empties:
        assert ob.name(empty) == "" and ob.labels(empty) == {} and ob.owner_uid(empty) == ""
        assert not ob.being_deleted(empty) and ob.container_statuses(empty) == []
        assert ob.pod_status(empty) == {} and ob.pod_spec(empty) == {}
    assert ob.name(None) == "" and ob.state(None) == {}


def test_a_job_ref_is_the_identity_of_a_parsed_job() -> None:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"].update(namespace="ns", uid="u", generation=4)
    raw["status"] = {"phase": "Completed"}
    job, ref = parse_job(raw), ob.JobRef.of(raw)
    for attr in ("namespace", "name", "uid", "key", "raw", "status"):
        assert getattr(ref, attr) == getattr(job, attr), attr
    assert ob.generation(raw) == job.generation == 4


def test_mypy_catches_a_mistyped_key(tmp_path: Path) -> None:
    """What the views are for: a misspelt field is a type error, where a plain dict would
    silently read None: read into its type (``.get`` of an unknown key is ``object``),
    subscripted, or an accessor's name. mypy (strict) reports exactly the misspelt ones."""
    require(importlib.util.find_spec("mypy") is not None, "mypy is not installed")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from controller.machinery import objects as ob\n"
        "from kubeclient import Obj\n"
        "\n"
        "\n"
        "def reads(pod: Obj) -> object:\n"
        "    good: str | None = ob.meta(pod).get('namespace')\n"
        "    phase: str = ob.pod_status(pod).get('phse') or 'Pending'\n"
        "    bad_meta: str | None = ob.meta(pod).get('namspace')\n"
        "    bad_node = ob.pod_spec(pod)['node_name']\n"
        "    bad_accessor = ob.namspace(pod)\n"
        "    return good, phase, bad_meta, bad_node, bad_accessor\n"
    )
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nignore_missing_imports = True\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--follow-imports",
            "silent",
            str(snippet),
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert out.returncode == 1, out.stdout + out.stderr
    assert len(errors) == 4, out.stdout  # line 6 reads a real key: no error
    assert "snippet.py:7: error: Incompatible types in assignment" in out.stdout
    assert "snippet.py:8: error: Incompatible types in assignment" in out.stdout
    assert 'snippet.py:9: error: TypedDict "PodSpec" has no key "node_name"' in out.stdout
    assert 'snippet.py:10: error: Module has no attribute "namspace"' in out.stdout
