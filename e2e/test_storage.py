"""spec.storage on the real cluster: results that outlive the job, restarts that resume from a
checkpoint without partitioning again, damaged checkpoints and partitions detected.

Every job here is examples/graphsage/dgljob-storage.yaml (a claim made from its template,
kept after the job) with smaller batches, so that an epoch lasts a few seconds and a worker
can be deleted while one runs. On this machine's cluster the claims bind to
localcluster/volumes.py's static volumes; elsewhere to the default StorageClass.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.helpers import (
    EXAMPLE,
    accuracy,
    apply,
    claims_namespace,
    conditions,
    epochs_done,
    event_messages,
    figure,
    get_job,
    launcher_args,
    succeeded,
    wait_finished,
    wait_job,
)
from tests.support.waiting import wait_for

EPOCHS = 8
IMAGE = "dgloperator/graphsage:v0.1.0"


@pytest.fixture(scope="module")
def ns(cluster: Any, operator: str, kubeconfig: Any) -> Iterator[str]:
    """One namespace for the module (the uninterrupted run is shared by two tests)."""
    yield from claims_namespace(cluster, kubeconfig, "e2e-st")


def storage_job(ns: str, name: str, **run_policy: Any) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "dgljob-storage.yaml").read_text())
    job["metadata"].update(name=name, namespace=ns)
    job["spec"]["runPolicy"] = run_policy
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(EPOCHS)
    args[args.index("--batch-size") + 1] = "32"  # (a few seconds an epoch)
    return job


def seconds(job: dict[str, Any]) -> float:
    st = job["status"]
    started = time.mktime(time.strptime(st["startTime"], "%Y-%m-%dT%H:%M:%SZ"))
    done = time.mktime(time.strptime(st["completionTime"], "%Y-%m-%dT%H:%M:%SZ"))
    return done - started


def suspend(cluster: Any, ns: str, name: str, value: bool) -> None:
    """``runPolicy.suspend`` (argv as is: pytest-kubernetes would pass JSON through a shell)."""
    patch = json.dumps({"spec": {"runPolicy": {"suspend": value}}})
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "patch", "dgljob", name, "-n", ns,
         "--type=merge", "-p", patch],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def on_claim(cluster: Any, ns: str, claim: str, script: str, name: str) -> str:
    """Run ``script`` (Python) in a pod of the example's image with the claim at /results;
    its output."""
    container = {
        "name": "c",
        "image": IMAGE,
        "command": ["python3", "-c", script],
        "volumeMounts": [{"name": "r", "mountPath": "/results"}],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "containers": [container],
            "volumes": [{"name": "r", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }
    apply(cluster, pod)

    def ended() -> str | None:
        phase = cluster.kubectl(["get", "pod", name, "-n", ns])["status"].get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_for(ended, what=f"pod {name}", timeout=300, interval=1.0)
    out = str(cluster.logs(name, "c", ns))
    assert phase == "Succeeded", out[-3000:]
    cluster.kubectl(["delete", "pod", name, "-n", ns, "--wait=false"], as_dict=False)
    return out


@pytest.fixture(scope="module")
def whole(cluster: Any, ns: str) -> dict[str, Any]:
    """The uninterrupted run (deleted by its TTL soon after it finished)."""
    apply(cluster, storage_job(ns, "whole", ttlSecondsAfterFinished=5))
    done = wait_finished(cluster, ns, "whole", timeout=900)
    assert succeeded(done), conditions(done)
    log = cluster.logs("whole-launcher", "dgl-graphsage", ns)
    return {"job": done, "accuracy": accuracy(log), "seconds": seconds(done)}


def test_a_worker_lost_at_epoch_k_resumes_there_without_partitioning_again(
    cluster: Any, ns: str, whole: dict[str, Any]
) -> None:
    apply(cluster, storage_job(ns, "cut", backoffLimit=1))

    wait_job(cluster, ns, "cut", lambda j: epochs_done(j) >= 2, 900, "2 epochs trained")
    cluster.kubectl(["delete", "pod", "cut-worker-1", "-n", ns, "--wait=false"], as_dict=False)
    done = wait_finished(cluster, ns, "cut", timeout=900)
    assert succeeded(done), conditions(done)
    st = done["status"]
    assert st["restartCount"] == 1
    resumed = st["resume"]["epoch"]
    assert 2 <= resumed < EPOCHS, st["resume"]
    assert st["partitions"]["reused"] is True, st["partitions"]
    log = cluster.logs("cut-launcher", "dgl-graphsage", ns)
    assert "[1/5] partition: skipped: the partitioner pod reused the partitions cached at" in log
    assert f"resuming at epoch {resumed} of {EPOCHS} from the checkpoint runs/cut-" in log, log[
        -3000:
    ]
    trained = log.rsplit("[5/5] train\n", 1)[-1]
    assert f"[rank 0] epoch {resumed} loss" in trained
    assert f"[rank 0] epoch {resumed - 1} loss" not in trained
    assert event_messages(cluster, ns, "PartitionsReused") and event_messages(
        cluster, ns, "Resuming"
    )
    acc = accuracy(log)
    assert abs(acc - whole["accuracy"]) <= 0.02, (acc, whole["accuracy"])
    figure(
        f"restart with spec.storage: a worker lost after {resumed} of {EPOCHS} epochs: "
        f"{seconds(done):.0f}s in all (partitions reused, resumed at epoch {resumed}) vs "
        f"{whole['seconds']:.0f}s uninterrupted; test accuracy {acc:.4f} vs {whole['accuracy']:.4f}"
    )


def test_results_outlive_the_job_and_the_model_loads(
    cluster: Any, ns: str, whole: dict[str, Any]
) -> None:
    """The uninterrupted run is gone (TTL), its claim and results are not: the model loads
    and scores on the test split what the job reported."""
    wait_for(
        lambda: "whole" not in {j["metadata"]["name"] for j in cluster.kubectl(
            ["get", "dgljobs", "-n", ns])["items"]},
        what="the TTL to delete the job",
        timeout=120,
        interval=1.0,
    )  # fmt: skip
    claim, folder = whole["job"]["status"]["results"].split(":", 1)
    assert claim == "whole-results"
    assert cluster.kubectl(["get", "pvc", claim, "-n", ns])["status"]["phase"] == "Bound"
    script = (
        "import json, subprocess, sys\n"
        f"out = '/results{folder}'\n"
        "print(json.dumps(json.load(open(out + '/metrics.json'))))\n"
        "print(json.dumps(json.load(open(out + '/dglrun.json'))['outcome']))\n"
        "sys.stdout.flush()\n"
        "subprocess.run([sys.executable, 'code/evaluate.py', '--results', out,\n"
        "                '--dataset_root', 'raw_data'], check=True)\n"
    )
    out = on_claim(cluster, ns, claim, script, "read-back")
    lines = [ln for ln in out.splitlines() if ln.startswith(("{", '"'))]  # (not DGL's warnings)
    metrics, outcome, evaluated = (json.loads(x) for x in lines[-3:])
    assert outcome == "succeeded" and metrics["epochs"] == EPOCHS
    assert abs(metrics["test_accuracy"] - whole["accuracy"]) < 1e-4
    assert evaluated["split"] == "test_mask" and evaluated["nodes"] > 0
    assert abs(evaluated["accuracy"] - metrics["test_accuracy"]) <= 0.005, evaluated
    figure(
        f"results on the claim after the job was deleted: model.pt scores "
        f"{evaluated['accuracy']:.4f} on {evaluated['nodes']} test nodes "
        f"(the job reported {metrics['test_accuracy']:.4f})"
    )


def test_a_damaged_checkpoint_and_damaged_partitions_are_detected(cluster: Any, ns: str) -> None:
    """Suspended after 3 epochs, the newest checkpoint truncated and a cached partition file
    altered: on resuming, the partitioner names the file and partitions again, dglrun falls
    back to the checkpoint before with a Warning event, and the job succeeds."""
    apply(cluster, storage_job(ns, "damaged"))

    wait_job(cluster, ns, "damaged", lambda j: epochs_done(j) >= 3, 900, "3 epochs trained")
    suspend(cluster, ns, "damaged", True)
    wait_for(
        lambda: get_job(cluster, ns, "damaged")["status"].get("phase") == "Suspended"
        and not cluster.kubectl(["get", "pods", "-n", ns, "-l",
                                 "dgl.qihoo.net/job-name=damaged"])["items"],
        what="the job suspended and its pods gone",
        timeout=300,
        interval=1.0,
    )  # fmt: skip
    run = get_job(cluster, ns, "damaged")["status"]["results"].split(":", 1)[1].rsplit("/", 1)[0]
    script = (
        "import glob, os, re\n"
        f"ckpts = sorted(glob.glob('/results{run}/checkpoints/epoch-*.pt'),\n"
        "               key=lambda p: int(re.findall(r'\\d+', os.path.basename(p))[0]))\n"
        "newest = ckpts[-1]\n"
        "os.truncate(newest, os.path.getsize(newest) // 2)\n"
        "part = sorted(glob.glob('/results/partitions/*/part0/graph.dgl'))[0]\n"
        "with open(part, 'r+b') as f:\n"
        "    f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 0xFF]))\n"
        "print(os.path.basename(newest), part)\n"
    )
    damaged = on_claim(cluster, ns, "damaged-results", script, "damage").split()
    newest, part = damaged[-2], damaged[-1]
    suspend(cluster, ns, "damaged", False)
    done = wait_finished(cluster, ns, "damaged", timeout=900)
    assert succeeded(done), conditions(done)
    st = done["status"]
    assert st["partitions"]["reused"] is False
    kept = int(newest.split("-")[1].split(".")[0])
    assert st["resume"]["epoch"] == kept - 1, (newest, st["resume"])
    skipped = event_messages(cluster, ns, "CheckpointSkipped")
    assert any(newest in m and "does not match its SHA-256" in m for m in skipped), skipped
    rebuilt = event_messages(cluster, ns, "PartitionCacheDamaged")
    assert any(part.replace("/results", "/dgl_storage") in m for m in rebuilt), rebuilt
    log = cluster.logs("damaged-launcher", "dgl-graphsage", ns)
    assert "Traceback" not in log.split("[5/5] train")[0]
    partitioner = cluster.logs("damaged-partitioner", "dgl-graphsage", ns)
    assert "the cached partitions are damaged" in partitioner and "partitioning again" in (
        partitioner
    )


def test_a_path_on_a_new_claim_is_made_and_holds_everything(cluster: Any, ns: str) -> None:
    """issue 26: ``storage.path`` on a claim made from the template (empty: the folder cannot
    exist yet). The job succeeds, and the results, the partitions and every pod's log are
    under that folder, none at the claim's root."""
    job = storage_job(ns, "pathed")
    job["spec"]["storage"]["path"] = "team-a/graphsage"
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = "2"  # (what is written where, not how well)
    apply(cluster, job)
    done = wait_finished(cluster, ns, "pathed", timeout=900)
    assert succeeded(done), conditions(done)
    claim, folder = done["status"]["results"].split(":", 1)
    run = f"pathed-{done['metadata']['uid'][:8]}"
    assert (claim, folder) == ("pathed-results", f"/team-a/graphsage/runs/{run}/output")
    script = (
        "import json, os\n"
        "top = '/results/team-a/graphsage'\n"
        f"out, logs = top + '/runs/{run}/output', top + '/runs/{run}/logs'\n"
        "print(json.dumps({\n"
        "    'root': sorted(os.listdir('/results')),\n"
        "    'path': sorted(os.listdir(top)),\n"
        "    'outcome': json.load(open(out + '/dglrun.json'))['outcome'],\n"
        "    'epochs': json.load(open(out + '/metrics.json'))['epochs'],\n"
        "    'logs': sorted({name.split('-')[0] for name in os.listdir(logs)}),\n"
        "    'partitions': len(os.listdir(top + '/partitions')),\n"
        "}))\n"
    )
    out = on_claim(cluster, ns, claim, script, "read-pathed")
    seen = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    assert "team-a" in seen["root"], seen
    assert "runs" not in seen["root"] and "partitions" not in seen["root"], seen
    assert seen["path"] == ["partitions", "runs"], seen
    assert seen["outcome"] == "succeeded" and seen["epochs"] == 2, seen  # (the trainers wrote)
    assert seen["logs"] == ["launcher", "partitioner"], seen  # (both dglruns wrote there)
    assert seen["partitions"] >= 1, seen
