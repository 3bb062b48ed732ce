"""dglctl's parsing and kubectl-like output (no server)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from dgl_operator import cli

REPO = Path(__file__).resolve().parents[2]


def test_durations_as_kubectl_takes_them() -> None:
    assert [cli.duration(t) for t in ("90", "90s", "30m", "1h", "2d", "500ms")] == [
        90, 90, 1800, 3600, 172800, 0.5,
    ]  # fmt: skip
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration '1 hour'"):
        cli.duration("1 hour")


def test_age_as_kubectl_prints_it() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
    ages = [cli.age(s, now) for s in (
        "2026-11-26T11:59:15Z", "2026-11-26T11:50:00Z", "2026-11-26T09:00:00Z",
        "2026-11-20T12:00:00Z", None,
    )]  # fmt: skip
    assert ages == ["45s", "10m", "3h", "6d", "<unknown>"]


def test_the_jobs_table() -> None:
    job = {
        "metadata": {"name": "gnn", "namespace": "a", "creationTimestamp": None},
        "status": {
            "phase": "Training", "restartCount": 1, "progress": "5/5 train: epoch 2/6",
            "replicaStatuses": {"Worker": {"ready": "2/2"}}, "elastic": {"scale": "2/3"},
            "results": "gnn-results:/runs/x/output",
            "progressDetail": {"step": 5, "steps": 5, "stepName": "train", "percentage": 86,
                               "stepRemainingSeconds": 250, "estimatedRemainingSeconds": 250},
        },
    }  # fmt: skip
    lines = cli.jobs_table([job], wide=True, with_ns=True).splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "NAME", "PHASE", "WORKERS", "SCALE", "RESTARTS", "PROGRESS", "ETA", "AGE",
        "RESULTS",
    ]  # fmt: skip
    assert re.split(r"\s{3,}", lines[1]) == [
        "a", "gnn", "Training", "2/2", "2/3", "1", "5/5 train: epoch 2/6", "4m10s", "<unknown>",
        "gnn-results:/runs/x/output",
    ]  # fmt: skip
    assert lines[1].index("Training") == lines[0].index("PHASE")  # (aligned)


def test_usage_errors_exit_2_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["wait"])
    assert e.value.code == 2
    assert "the following arguments are required: name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["wait", "j", "--timeout", "soon"])
    assert "invalid duration 'soon'" in capsys.readouterr().err


def test_a_missing_kubeconfig_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    assert cli.main(["--kubeconfig", "/nonexistent/kubeconfig", "list"]) == 1
    err = capsys.readouterr().err
    assert err == "error: the kubeconfig /nonexistent/kubeconfig does not exist\n"
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, namespace",
    [
        (["report", "my-gnn", "-n", "team-a"], "team-a"),  # the user guide's
        (["-n", "team-a", "report", "my-gnn"], "team-a"),
        (["--namespace=team-a", "wait", "j", "--timeout", "1m"], "team-a"),
        (["-n", "team-a", "get", "j", "-n", "team-b"], "team-b"),  # the last one, as kubectl
        (["get", "j"], None),
    ],
)
def test_the_global_flags_go_before_or_after_the_verb(argv: list[str], namespace: str) -> None:
    a = cli.parser().parse_args(argv)
    assert a.namespace == namespace
    assert a.context is None and a.kubeconfig is None


def test_the_kubeconfig_after_the_verb_is_the_one_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "--kubeconfig", "/nonexistent/after"]) == 1
    assert capsys.readouterr().err == "error: the kubeconfig /nonexistent/after does not exist\n"


def test_the_jobs_table_has_kubectl_s_columns_in_its_order() -> None:
    """dglctl list shows what `kubectl get dglj` shows (the CRD's printer columns), AGE and
    the wide-only RESULTS at the end as kubectl's own tables."""
    crd = yaml.safe_load((REPO / "charts/dgl-operator/crds/qihoo.net_dgljobs.yaml").read_text())
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    normal = [c["name"].upper() for c in columns if not c.get("priority") and c["name"] != "Age"]
    wide = [c["name"].upper() for c in columns if c.get("priority")]
    head = cli.jobs_table([], wide=True, with_ns=False).split()
    assert head == ["NAME", *normal, "AGE", *wide]
