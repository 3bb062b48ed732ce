"""spec.storage on the real cluster, and the Python client on it: the notebook-style example
run as a user runs it (submit, follow the log, wait, copy the results, score the model here),
results that outlive the job (copied again by dglctl after it is deleted), restarts that
resume from a checkpoint without partitioning again (the client following the log across the
new launcher), damaged checkpoints and partitions detected.

Every job here is examples/graphsage/dgljob-storage.yaml (a claim made from its template,
kept after the job) with smaller batches, so that an epoch lasts a few seconds and a worker
can be deleted while one runs. On this machine's cluster the claims bind to
localcluster/volumes.py's static volumes; elsewhere to the default StorageClass.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dgl_operator.client import DGLJobClient, results
from e2e.helpers import (
    EXAMPLE,
    accuracy,
    apply,
    claims_namespace,
    conditions,
    connect,
    dgl_python,
    epochs_done,
    event_messages,
    figure,
    get_job,
    launcher_args,
    start_prober,
    succeeded,
    wait_finished,
    wait_job,
    wait_ready,
)
from kubeclient import NETWORKPOLICIES, PODS, SECRETS, NotFound, RestClient
from podcontract import STORAGE_DIR, logline
from tests.support.browser import open_page
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
def whole(cluster: Any, ns: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run, as a user runs it from Python: examples/graphsage/notebook.py
    (the client submits the storage example, follows its log, waits, copies the results and
    the model is scored in this process's DGL environment); then the job is deleted."""
    where = tmp_path_factory.mktemp("notebook")
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "DGLJOB_NAMESPACE": ns,
        "DGLJOB_NAME": "whole",
        "DGLJOB_EPOCHS": str(EPOCHS),
        "DGLJOB_BATCH_SIZE": "32",
        "RESULTS_DIR": str(where / "results"),
        "DGL_PYTHON": dgl_python("notebook.py's evaluation"),
    }
    run = subprocess.run(
        [sys.executable, str(EXAMPLE / "notebook.py")],
        env=env, capture_output=True, text=True, timeout=1200, cwd=where,
    )  # fmt: skip
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    for line in run.stdout.splitlines():
        figure(f"notebook.py: {line}")
    jobs = DGLJobClient(ns, kubeconfig=str(cluster.kubeconfig))
    done = jobs.get("whole").raw  # (the server's object: the helpers read dicts)
    assert succeeded(done), conditions(done)
    metrics = json.loads((where / "results" / "metrics.json").read_text())
    jobs.delete("whole")
    return {
        "job": done,
        "accuracy": metrics["test_accuracy"],
        "seconds": seconds(done),
        "output": run.stdout,
        "results": where / "results",
    }


def test_the_notebook_submits_follows_collects_and_scores_the_model(
    whole: dict[str, Any],
) -> None:
    """What notebook.py printed: every step of the launcher's log it followed, the copy of
    the results, and the model scored locally as the job scored it."""
    out = whole["output"]
    assert "submitted dgljob whole in namespace" in out
    steps = [ln.split("]")[0] + "]" for ln in out.splitlines() if ln[:1] == "[" and "/5]" in ln]
    assert {"[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"} <= set(steps), out
    assert "dglrun: done:" in out and "whole: Completed, restarts 0" in out
    assert "event DGLJobSucceeded" in out
    results = whole["results"]
    for name in ("model.pt", "metrics.json", "dglrun.json", "dglctl-source.json"):
        assert (results / name).is_file(), name
    assert any((results / "logs").rglob("*.log")), sorted(results.rglob("*"))
    source = json.loads((results / "dglctl-source.json").read_text())
    assert source["claim"] == "whole-results" and source["folder"].startswith("/runs/whole-")
    assert f"from claim whole-results, folder {source['folder']} (job whole)" in out
    scored = [ln for ln in out.splitlines() if ln.startswith("model.pt scores ")][-1]
    here = float(scored.split()[2])
    assert abs(here - whole["accuracy"]) <= 0.005, scored


@pytest.fixture(scope="module")
def cut(cluster: Any, ns: str) -> dict[str, Any]:
    """The job "cut": a worker deleted after 2 epochs, restarted (backoffLimit 1) and resumed;
    the client follows its log from the first line; memory samples every 2 s (dglctl report's
    plot). Its object when done, and the lines followed."""
    job = storage_job(ns, "cut", backoffLimit=1)
    for role in ("Launcher", "Worker"):
        main = job["spec"]["dglReplicaSpecs"][role]["template"]["spec"]["containers"][0]
        main.setdefault("env", []).append({"name": logline.SAMPLE_ENV, "value": "2"})
    apply(cluster, job)
    # the client follows the launcher's log from its first line, across the restart
    followed: list[str] = []
    jobs = DGLJobClient(ns, kubeconfig=str(cluster.kubeconfig))
    follower = threading.Thread(target=lambda: followed.extend(jobs.logs("cut", follow=True)))
    follower.start()

    wait_job(cluster, ns, "cut", lambda j: epochs_done(j) >= 2, 900, "2 epochs trained")
    cluster.kubectl(["delete", "pod", "cut-worker-1", "-n", ns, "--wait=false"], as_dict=False)
    done = wait_finished(cluster, ns, "cut", timeout=900)
    follower.join(120)
    assert not follower.is_alive(), "logs(follow=True) did not end with the job"
    return {"job": done, "followed": followed}


def test_a_worker_lost_at_epoch_k_resumes_there_without_partitioning_again(
    cluster: Any, ns: str, whole: dict[str, Any], cut: dict[str, Any]
) -> None:
    done, followed = cut["job"], cut["followed"]
    marker = "--- cut-launcher was replaced (launcher 2): its log follows"
    assert marker in followed, followed[-40:]
    first, second = "\n".join(followed).split(marker)
    assert "[5/5] train" in first and "[rank 0] epoch 1 loss" in first
    assert "resuming at epoch" in second and second.count("dglrun: done:") == 1
    assert first.count("[1/5]") == 1 and "dglrun: done:" not in first
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


def test_dglctl_report_of_the_restarted_job_in_a_browser(
    cluster: Any, ns: str, cut: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    """``dglctl report cut``: one page from the API server (the job, its pods, the Events of the
    first attempt's pods, deleted since) and the claim (both attempts' stamped logs, read
    through a reader pod); in chromium, a bar per pod and step, a memory line per pod and
    attempt that sampled, nothing in the console."""
    from selenium.webdriver.common.by import By

    page = tmp_path / "cut.html"
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    run = subprocess.run(
        [sys.executable, "-m", "dgl_operator", "-n", ns, "report", "cut", "-o", str(page)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert open_page(browser, page) == []
    bars = [
        (b.get_attribute("data-row") or "", b.get_attribute("data-step") or "")
        for b in browser.find_elements(By.CSS_SELECTOR, "svg#timeline rect.bar")
    ]
    assert len(bars) == len(set(bars)), bars  # one bar per pod (and attempt) and step
    rows = {row for row, _ in bars}
    for n in (1, 2):  # both attempts, their pods (the first's from their Events)
        for replica in ("launcher", "worker-0", "worker-1"):
            assert any(r.startswith(f"{replica} #{n} (") for r in rows), (replica, n, rows)
    # both attempts' steps, from both launchers' logs on the claim
    steps = {n: {step for row, step in bars if row == f"job, attempt {n}"} for n in (1, 2)}
    assert {"train epoch 1", "train epoch 2"} <= steps[1] and "evaluate" not in steps[1], steps
    assert {f"train epoch {EPOCHS}", "evaluate"} <= steps[2], steps
    resumed = cut["job"]["status"]["resume"]["epoch"]
    second = {step for row, step in bars if row.startswith("worker-1 #2 (")}
    assert {f"train epoch {e}" for e in range(resumed + 1, EPOCHS + 1)} | {"evaluate"} <= second
    first = {step for row, step in bars if row.startswith("worker-1 #1 (")}  # deleted mid-epoch
    assert {"train epoch 1", "train epoch 2"} <= first and "evaluate" not in first, first
    lines = [
        p.get_attribute("data-pod")
        for p in browser.find_elements(By.CSS_SELECTOR, "svg#memory polyline.pod")
    ]
    assert len(lines) == len(set(lines)), lines
    assert {"launcher #1", "launcher #2", "worker-0 #2", "worker-1 #2"} <= set(lines), lines
    # (the example sets no memory limit: the peak dglrun measured in training is the line)
    assert browser.find_elements(By.CSS_SELECTOR, "svg#memory line.peak")
    text = browser.find_element(By.TAG_NAME, "body").text
    for shown in ("DGLJobRestarting", "Killing", "pulled by its worker", "Succeeded"):
        assert shown in text, shown
    browser.save_screenshot(str(tmp_path / "cut.png"))
    figure(f"dglctl report cut: {len(bars)} bars in {len(rows)} rows, {len(lines)} pods' memory")


def test_results_outlive_the_job_and_dglctl_copies_them_from_where_its_status_said(
    cluster: Any, ns: str, whole: dict[str, Any], tmp_path: Path
) -> None:
    """The uninterrupted run is gone (deleted once notebook.py had run), its claim and
    results are not: ``dglctl results --from <claim>:<folder> --image`` copies the same files,
    byte for byte, as the notebook copied while the job existed (and scored: model.pt gave
    the job's accuracy there), and the reader pod is gone after it."""
    wait_for(
        lambda: "whole" not in {j["metadata"]["name"] for j in cluster.kubectl(
            ["get", "dgljobs", "-n", ns])["items"]},
        what="the job to be deleted",
        timeout=120,
        interval=1.0,
    )  # fmt: skip
    where = whole["job"]["status"]["results"]
    claim = where.split(":", 1)[0]
    assert claim == "whole-results"
    assert cluster.kubectl(["get", "pvc", claim, "-n", ns])["status"]["phase"] == "Bound"
    out = subprocess.run(
        [sys.executable, "-m", "dgl_operator", "--kubeconfig", str(cluster.kubeconfig), "-n", ns,
         "results", "whole", str(tmp_path / "again"), "--from", where, "--image", IMAGE,
         "-o", "json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    copied = json.loads(out.stdout)
    assert copied["claim"] == claim and "model.pt" in copied["files"]
    for name in copied["files"]:
        mine, theirs = tmp_path / "again" / name, whole["results"] / name
        assert mine.read_bytes() == theirs.read_bytes(), name
    again = tmp_path / "again"
    metrics = json.loads((again / "metrics.json").read_text())
    assert json.loads((again / "dglrun.json").read_text())["outcome"] == "succeeded"
    assert metrics["epochs"] == EPOCHS and metrics["test_accuracy"] == whole["accuracy"]
    leftover = cluster.kubectl(
        ["get", "pods", "-n", ns, "-l", "app.kubernetes.io/created-by=dglctl"]
    )
    assert not [p for p in leftover["items"] if not p["metadata"].get("deletionTimestamp")]
    figure(
        f"results on the claim after the job was deleted: dglctl results --from {where}: "
        f"{len(copied['files'])} files, {copied['bytes']} bytes, the same as the notebook's copy"
    )


def test_the_results_reader_serves_its_copy_alone(
    cluster: Any, ns: str, whole: dict[str, Any], other_namespace: str
) -> None:
    """A reader pod as ``dglctl results`` makes it, held up while it serves: a pod of another
    namespace and a pod of its own reach none of its port (its NetworkPolicy admits no pod),
    and through the API server's proxy, the only way in, nothing is served without the call's
    token; with it, the manifest of the run's files."""
    where = whole["job"]["status"]["results"]
    claim, _, folder = where.partition(":")
    src = results.ResultsSource(ns, claim, folder.rsplit("/output", 1)[0], image=IMAGE)
    name, token = f"held-results-{uuid.uuid4().hex[:4]}", secrets.token_urlsafe(24)
    foe_ns = other_namespace
    api = RestClient.from_config(str(cluster.kubeconfig))
    try:
        api.create(NETWORKPOLICIES, ns, results.reader_policy(src, name))
        api.create(SECRETS, ns, results.reader_secret(src, name, token))
        api.create(PODS, ns, results.reader_pod(src, name, ("output",)))
        start_prober(cluster, foe_ns, "foe", IMAGE)
        start_prober(cluster, ns, "neighbour", IMAGE)
        reader_pod = wait_ready(cluster, ns, name, 180)
        reader = f"{reader_pod['status']['podIP']}:{results.PORT}"
        for where_from, pod in ((foe_ns, "foe"), (ns, "neighbour")):
            got = connect(cluster, where_from, pod, [reader])
            assert got == {reader: "timeout"}, f"{where_from}/{pod} reached the reader: {got}"
        target = f"{name}:{results.PORT}"
        for path in ("proxy/manifest", "proxy/archive", f"proxy/{token[:-1]}/manifest"):
            with pytest.raises(NotFound), api.stream(PODS, ns, target, path) as s:
                s.read()
        with api.stream(PODS, ns, target, f"proxy/{token}/manifest") as s:
            names = [f["name"] for f in json.loads(s.read())["files"]]
        assert "model.pt" in names, names
    finally:
        with contextlib.suppress(NotFound):
            api.delete(PODS, ns, name, grace_period_seconds=0)
        with contextlib.suppress(NotFound):
            api.delete(NETWORKPOLICIES, ns, name)
        with contextlib.suppress(NotFound):
            api.delete(SECRETS, ns, name)
        with contextlib.suppress(NotFound):
            api.delete(PODS, ns, "neighbour", grace_period_seconds=0)
    figure("results reader: unreachable from another namespace and its own, 404 without its token")


def suspend_until_gone(cluster: Any, ns: str, name: str) -> None:
    """Suspend the job and wait until it says so and its pods are gone."""
    suspend(cluster, ns, name, True)
    wait_for(
        lambda: get_job(cluster, ns, name)["status"].get("phase") == "Suspended"
        and not cluster.kubectl(["get", "pods", "-n", ns, "-l",
                                 f"dgl.qihoo.net/job-name={name}"])["items"],
        what="the job suspended and its pods gone",
        timeout=300,
        interval=1.0,
    )  # fmt: skip


def test_a_damaged_checkpoint_and_damaged_partitions_are_detected(cluster: Any, ns: str) -> None:
    """Suspended after 3 epochs, the newest checkpoint truncated and a cached partition file
    altered: on resuming, the partitioner names the file and partitions again, dglrun falls
    back to the checkpoint before with a Warning event, and the job succeeds."""
    apply(cluster, storage_job(ns, "damaged"))

    wait_job(cluster, ns, "damaged", lambda j: epochs_done(j) >= 3, 900, "3 epochs trained")
    suspend_until_gone(cluster, ns, "damaged")
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


def test_a_planted_checkpoint_fails_the_job_at_once_naming_the_file(cluster: Any, ns: str) -> None:
    """issue 57: suspended after 2 epochs, every kept checkpoint overwritten with a pickle
    payload and its digest rewritten (as anybody who mounts the claim can). On resuming, the
    trainers refuse the newest, naming it, and the job fails FileRefused at once (backoffLimit
    2 unused), its condition and Warning event quoting the refusal; the payload never ran.
    (The twin, a damaged checkpoint that is only skipped, is the test above.)"""
    apply(cluster, storage_job(ns, "planted", backoffLimit=2))
    wait_job(cluster, ns, "planted", lambda j: epochs_done(j) >= 2, 900, "2 epochs trained")
    suspend_until_gone(cluster, ns, "planted")
    run = get_job(cluster, ns, "planted")["status"]["results"].split(":", 1)[1].rsplit("/", 1)[0]
    script = (
        "import glob, hashlib, os, re, torch\n"
        "class Payload:\n"
        "    def __reduce__(self):\n"
        f"        return (os.system, ('touch {STORAGE_DIR}{run}/pwned',))\n"
        f"ckpts = sorted(glob.glob('/results{run}/checkpoints/epoch-*.pt'),\n"
        "               key=lambda p: int(re.findall(r'\\d+', os.path.basename(p))[0]))\n"
        "for path in ckpts:\n"
        "    torch.save({'epochs_done': 1, 'model': Payload()}, path)\n"
        "    digest = hashlib.sha256(open(path, 'rb').read()).hexdigest()\n"
        "    open(path + '.sha256', 'w').write(digest + '\\n')\n"
        "print(len(ckpts), os.path.basename(ckpts[-1]))\n"
    )
    planted = on_claim(cluster, ns, "planted-results", script, "plant").split()
    count, newest = int(planted[-2]), planted[-1]
    assert count == 2, planted
    suspend(cluster, ns, "planted", False)
    done = wait_finished(cluster, ns, "planted", timeout=900)
    failed = conditions(done).get("Failed", {})
    assert failed.get("status") == "True" and failed.get("reason") == "FileRefused", conditions(
        done
    )
    path = f"{STORAGE_DIR}{run}/checkpoints/{newest}"
    assert f"checkpoint {path} is refused: it holds more than tensors" in failed["message"], failed
    assert "posix.system" in failed["message"], failed
    assert int(done["status"].get("restartCount") or 0) == 0, done["status"]
    refused = event_messages(cluster, ns, "FileRefused")
    assert any(path in m and "is refused" in m for m in refused), refused
    left = on_claim(cluster, ns, "planted-results",
                    f"import os; print(os.path.exists('/results{run}/pwned'))", "look")  # fmt: skip
    assert left.split()[-1] == "False", "the planted payload ran"


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
