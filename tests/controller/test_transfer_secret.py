"""controller/features/transfer.py: the transfer Secret's name is random per job, found again
after a restart of the operator, and kept for a job an operator before this one made."""

from __future__ import annotations

import copy
import re
from typing import Any

from controller.api import parse_job
from controller.builders import BuildOptions
from controller.builders.desired import desired
from controller.features import transfer
from controller.features.transfer import TRANSFER_SECRET_ANNOTATION


def test_a_new_job_gets_a_random_name_that_its_pods_carry(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(seed_job_raw)
    assert transfer.known(job, []).transfer_secret == ""
    one, two = transfer.chosen(job), transfer.chosen(job)
    assert re.fullmatch(r"dgl-graphsage-transfer-[0-9a-f]{8}", one.transfer_secret)
    assert one.transfer_secret != two.transfer_secret  # nobody can take it first
    assert transfer.chosen(one) is one  # chosen once
    want = desired(one, BuildOptions())
    (secret,) = want.transfer
    assert secret["metadata"]["name"] == one.transfer_secret
    for pod in [*want.workers, want.partitioner, want.launcher]:
        assert pod is not None
        assert pod["metadata"]["annotations"][TRANSFER_SECRET_ANNOTATION] == one.transfer_secret
        names = [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
        assert names == [one.transfer_secret]


def test_the_name_is_found_again_from_the_status_or_else_the_pods(
    seed_job_raw: dict[str, Any],
) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["status"] = {"transferSecret": "dgl-graphsage-transfer-0badcafe"}
    assert transfer.known(parse_job(raw), []).transfer_secret == "dgl-graphsage-transfer-0badcafe"
    # the pods were made, the status not yet written (the operator restarted between)
    job = parse_job(seed_job_raw)
    made = desired(transfer.chosen(job), BuildOptions())
    found = transfer.known(job, made.workers)
    assert found.transfer_secret == made.transfer[0]["metadata"]["name"]
    # pods an operator before this one made: the name it used
    old = [{"metadata": {"name": "dgl-graphsage-worker-0", "annotations": {}}}]
    assert transfer.known(job, old).transfer_secret == "dgl-graphsage-transfer"


def test_every_job_with_workers_has_a_token_and_one_without_none(
    seed_job_raw: dict[str, Any],
) -> None:
    """The workers' agents ask the token of dglrun in every mode with workers (KubectlCp is
    served as HTTP); a Skip job has no workers and no token."""
    for mode, transfer_asked in (("DGL-API", "KubectlCp"), ("DistParMETIS", "HTTP")):
        raw = copy.deepcopy(seed_job_raw)
        raw["spec"]["partitionTransfer"] = transfer_asked
        raw["spec"]["partitionMode"] = mode
        if mode == "DistParMETIS":
            raw["spec"]["chunkedGraph"] = {"path": "/data/chunked"}
        job = transfer.chosen(parse_job(raw))
        assert job.transfer_secret, mode
        want = desired(job, BuildOptions())
        assert [s["metadata"]["name"] for s in want.transfer] == [job.transfer_secret], mode
        for pod in (want.launcher, *want.workers):
            mounted = [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
            assert mounted == [job.transfer_secret], (mode, pod["metadata"]["name"])
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["partitionMode"] = "Skip"
    del raw["spec"]["dglReplicaSpecs"]["Worker"]
    job = parse_job(raw)
    assert transfer.chosen(job).transfer_secret == ""
    assert desired(job, BuildOptions()).transfer == []
