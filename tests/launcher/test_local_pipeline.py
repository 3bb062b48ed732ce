"""dglrun end to end on the local transport, with stand-in entry points (fast, no DGL).

Real DGL runs through the same path in tests/pipeline/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from launcher.workers import local as local_transport
from launcher.workers.transport import WorkerTransportError
from tests.launcher.helpers import FIXTURES, dglrun
from tests.support.paths import REPO
from tests.support.prerequisites import require

PART = str(FIXTURES / "fake_partition.py")
TRAIN = str(FIXTURES / "fake_train.py")


def local_args(ws: Path, *extra: str) -> list[str]:
    return [
        "--transport",
        "local",
        "-g",
        "g",
        "--num-partitions",
        "2",
        "--partition-entry-point",
        PART,
        "--train-entry-point",
        TRAIN,
        "--workspace",
        str(ws),
        "--balance-train",
        *extra,
    ]


def no_stray_processes() -> bool:
    out = subprocess.run(["pgrep", "-f", "fake_train.py"], capture_output=True, text=True)
    return out.stdout.strip() == ""


def test_five_phases_and_each_worker_gets_only_its_part(tmp_path: Path, no_leftovers: None) -> None:
    proc = dglrun(*local_args(tmp_path, "--keep-local", "--num-epochs", "2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for k, name in enumerate(["partition", "deliver", "dispatch", "configure", "train"], 1):
        assert f"[{k}/5] {name}\n" in out and f"[{k}/5] {name} done in" in out
    assert "partitioned into 2 parts (balance_train=True)" in out
    assert "  peak memory of the partition entry point: " in out  # its own peak RSS, in MB
    assert "[worker-1/trainer-0] trainer rank 1/2 met the master" in out
    assert "dglrun: done: partition" in out and "test accuracy 0.5000" in out
    for i in (0, 1):
        wl = tmp_path / "workers" / f"worker-{i}" / "dgl_workspace" / "workload"
        expected = {"g.json", f"part{i}", "ip_config.txt"} | ({"output"} if i == 0 else set())
        assert {p.name for p in wl.iterdir()} == expected
        assert (wl / f"part{i}").is_dir() and not (wl / f"part{1 - i}").exists()
        assert (wl / "g.json").is_file()
        lines = (wl / "ip_config.txt").read_text().splitlines()
        assert len(lines) == 2 and all(len(x.split()) == 2 for x in lines)
    assert (tmp_path / "output" / "metrics.json").is_file()
    assert no_stray_processes()


def test_a_failing_trainer_stops_everything(tmp_path: Path, no_leftovers: None) -> None:
    started = time.monotonic()
    proc = dglrun(
        *local_args(tmp_path, "--train-args", "--sleep 120"),
        env={"FAKE_FAIL_RANK": "1", "FAKE_FAIL_AFTER": "1"},
    )
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert took < 30
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: train failed: trainer 0 on worker-1"), last
    assert "exited with code 1 (trainer failing on purpose)" in last, last  # its last line
    assert "stopped every DGL process" in last
    assert no_stray_processes()


def test_partitions_must_match_workers_before_any_copy(tmp_path: Path, no_leftovers: None) -> None:
    proc = dglrun(*local_args(tmp_path, "--local-workers", "3", "--keep-local"))
    assert proc.returncode == 1
    assert "dispatch failed: the graph has 2 partitions but there are 3 workers" in proc.stdout
    assert "nothing was copied" in proc.stdout
    for i in range(3):
        assert not (tmp_path / "workers" / f"worker-{i}" / "dgl_workspace" / "workload").exists()


def test_partition_output_must_match_num_partitions(tmp_path: Path) -> None:
    proc = dglrun(*local_args(tmp_path, "--partition-args", "--parts_override 3"))
    assert proc.returncode == 1
    assert "partition failed" in proc.stdout and "3 partitions but 2 were expected" in proc.stdout


@pytest.mark.parametrize("flag", ["--partition-entry-point", "--train-entry-point"])
def test_missing_entry_point(tmp_path: Path, flag: str) -> None:
    args = local_args(tmp_path)
    args[args.index(flag) + 1] = "code/nope.py"
    proc = dglrun(*args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{flag} code/nope.py does not exist" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_failing_partition_entry_point(tmp_path: Path) -> None:
    proc = dglrun(*local_args(tmp_path, "--partition-args=--no-such-flag"))
    assert proc.returncode == 1
    assert "partition failed: the partition entry point" in proc.stdout
    assert "exited with code 2" in proc.stdout


def test_skip_mode_runs_the_training_entry_point_alone(tmp_path: Path) -> None:
    script = tmp_path / "alone.py"
    script.write_text(
        "import sys, os; print('alone', sys.argv[1:], os.environ['DGLRUN_OUTPUT_DIR'])"
    )
    proc = dglrun(
        "-g",
        "g",
        "--train-entry-point",
        str(script),
        "--workspace",
        str(tmp_path),
        "--num-epochs",
        "3",
        env={"DGL_OPERATOR_PHASE_ENV": "Launcher_Workload"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "alone ['--graph_name', 'g', '--num_epochs', '3', '--batch_size', '1000']" in proc.stdout
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit(4)")
    proc = dglrun(
        "-g",
        "g",
        "--train-entry-point",
        str(failing),
        "--workspace",
        str(tmp_path),
        env={"DGL_OPERATOR_PHASE_ENV": "Launcher_Workload"},
    )
    assert proc.returncode == 1 and "exited with code 4" in proc.stdout


def test_without_root_the_local_transport_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(WorkerTransportError, match="the local transport needs root"):
        local_transport.check_prerequisites()


def test_without_root_dglrun_says_so_before_partitioning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from launcher.options import parse
    from launcher.runs import run

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert run(parse(local_args(tmp_path), env={})) == 1
    out = capsys.readouterr().out
    assert "dglrun: error: the local transport needs root" in out, out
    assert "[1/5] partition" not in out and not (tmp_path / "dataset").exists()


def test_without_root_dglrun_uses_a_user_namespace(tmp_path: Path, no_leftovers: None) -> None:
    """As an unprivileged user (nobody, with Debian's python3), dglrun runs itself as "root"
    of a user namespace of its own: the same five phases, and nothing on the host network."""
    python = "/usr/bin/python3"
    require(Path(python).exists() and shutil.which("setpriv") is not None, f"{python}, setpriv")
    from launcher.workers.local import user_namespaces_work

    require(user_namespaces_work() is None, "unprivileged user namespaces")
    top = Path(tempfile.mkdtemp(prefix="dglrun-nobody-", dir="/tmp"))
    try:
        code, ws = top / "code", top / "ws"
        # a worker image: dglrun's programs there (the DGL processes' runner among them)
        for package in ("launcher", "chunkedgraph", "podprogram", "podcontract", "dglprocess"):
            shutil.copytree(REPO / package, code / package)
        shutil.copytree(FIXTURES, code / "fixtures")
        ws.mkdir()
        for path in (top, *top.rglob("*")):
            path.chmod(0o755)
        os.chown(ws, 65534, 65534)
        args = local_args(ws)
        args[args.index(PART)] = str(code / "fixtures" / "fake_partition.py")
        args[args.index(TRAIN)] = str(code / "fixtures" / "fake_train.py")
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        proc = subprocess.run(
            [*nobody, python, "-m", "launcher.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=top,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(code), "HOME": str(ws)},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "[5/5] train done in" in proc.stdout
        assert proc.stdout.count("met the master") == 2
        assert (ws / "output" / "metrics.json").is_file()
        assert (ws / "output").stat().st_uid == 65534, "files belong to the user who ran it"
    finally:
        shutil.rmtree(top, ignore_errors=True)
