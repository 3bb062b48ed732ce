"""Your own training script on the cluster: examples/minimal as its README runs it (the script
from a ConfigMap, the example image, storage for its checkpoints), to Succeeded with its
progress, ETA and metrics in the job's status, through one restart that resumes from its
checkpoint (a worker deleted after two epochs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helpers import (
    apply,
    claims_namespace,
    conditions,
    figure,
    get_job,
    launcher_args,
    succeeded,
    wait_finished,
)
from localcluster.cluster import REPO
from tests.support.waiting import wait_for

MINIMAL = REPO / "examples" / "minimal"
EPOCHS = 8


@pytest.fixture
def ns(cluster: Any, operator: str, kubeconfig: Path) -> Iterator[str]:
    yield from claims_namespace(cluster, kubeconfig, "e2e-min")


def minimal_job(ns: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((MINIMAL / "dgljob.yaml").read_text())
    job["metadata"]["namespace"] = ns
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(EPOCHS)
    args[args.index("--batch-size") + 1] = "32"  # (a few seconds an epoch)
    return job


def test_your_own_script_trains_reports_and_resumes_after_a_restart(cluster: Any, ns: str) -> None:
    cluster.kubectl(
        ["-n", ns, "create", "configmap", "minimal-script",
         f"--from-file={MINIMAL / 'train.py'}"],
        as_dict=False,
    )  # fmt: skip
    apply(cluster, minimal_job(ns))

    def two_epochs() -> dict[str, Any] | None:
        job = get_job(cluster, ns, "minimal")
        if any(conditions(job).get(t, {}).get("status") == "True" for t in ("Succeeded", "Failed")):
            raise AssertionError(f"minimal finished before epoch 2: {conditions(job)}")
        detail = job.get("status", {}).get("progressDetail") or {}
        return job if int(detail.get("epochsDone") or 0) >= 2 else None

    training = wait_for(two_epochs, what="minimal's second epoch", timeout=900, interval=1.0)
    detail = training["status"]["progressDetail"]
    # the epoch lines of a script of one's own give the progress, the ETA and the metrics
    assert detail["epochs"] == EPOCHS and detail["stepName"] == "train", detail
    assert detail.get("estimatedRemainingSeconds", 0) > 0 and detail.get("eta"), detail
    assert detail["metrics"]["loss"] > 0, detail
    assert training["status"]["progress"].startswith("5/5 train: epoch "), training["status"]

    cluster.kubectl(["-n", ns, "delete", "pod", "minimal-worker-1", "--wait=false"], as_dict=False)
    done = wait_finished(cluster, ns, "minimal", timeout=900)
    assert succeeded(done), conditions(done)
    st = done["status"]
    assert st["restartCount"] == 1, st
    resumed = st["resume"]["epoch"]
    assert 2 <= resumed < EPOCHS, st["resume"]
    log = cluster.logs("minimal-launcher", "main", ns)
    assert f"resuming at epoch {resumed} from " in log, log[-3000:]
    trained = log.rsplit("[5/5] train\n", 1)[-1]
    assert f"epoch {resumed} loss" in trained and f"epoch {resumed - 1} loss" not in trained
    accuracy = float(log.rsplit("test accuracy ", 1)[1].split()[0])
    assert accuracy > 0.5, log[-2000:]  # (8 classes in the example image's graph: chance 0.125)
    figure(
        f"examples/minimal (own script, ConfigMap): Succeeded after a restart at epoch "
        f"{resumed} of {EPOCHS}; test accuracy {accuracy:.4f}"
    )
