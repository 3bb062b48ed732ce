"""The dgl-operator CLI: flags, health endpoints, configuration errors."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from controller.builders import GANG_SCHEDULER_PLUGINS, BuildOptions
from controller.main import HealthServer, check_api, parse_addr, parse_settings
from kubeclient import LOCALQUEUES, PODGROUPS, WORKLOADS, Forbidden, NotFound, Resource
from tests.fakekube import FakeKube


def test_defaults() -> None:
    s = parse_settings([])
    assert s.namespace is None and s.workers == 4 and not s.leader_elect
    assert s.metrics_addr == ":8080" and s.health_addr == ":8081"
    assert s.options.watcher_loop_image == "dgloperator/watcher-loop:0.2.0"
    assert s.log_format == "json"


def test_flags() -> None:
    s = parse_settings(
        [
            "--namespace",
            "team-a",
            "--workers",
            "8",
            "--leader-elect",
            "--watcher-loop-image",
            "reg/wl:1",
            "--kubectl-download-image",
            "reg/kd:1",
            "--log-format",
            "console",
            "--metrics-addr",
            "127.0.0.1:9090",
            "--health-addr",
            "0",
        ]
    )
    assert s.namespace == "team-a" and s.workers == 8 and s.leader_elect
    assert s.options.watcher_loop_image == "reg/wl:1"
    assert s.options.kubectl_download_image == "reg/kd:1"
    assert parse_addr(s.metrics_addr, "--metrics-addr") == ("127.0.0.1", 9090)
    assert parse_addr(s.health_addr, "--health-addr") is None


def test_the_queue_is_made_mandatory_by_a_flag_of_its_own() -> None:
    """--kueue-manage-jobs-without-queue-name (the chart's kueueManageJobsWithoutQueueName)
    mirrors Kueue's manageJobsWithoutQueueName; off by default, as Kueue's."""
    assert not parse_settings([]).options.kueue_manage_jobs_without_queue_name
    assert not parse_settings(["--kueue"]).options.kueue_manage_jobs_without_queue_name
    s = parse_settings(["--kueue", "--kueue-manage-jobs-without-queue-name"])
    assert s.options.kueue and s.options.kueue_manage_jobs_without_queue_name


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "x"], "--workers: 'x' is not an integer"),
        (["--resync-period", "-1"], "--resync-period: must not be negative, got -1.0"),
        (["--resync-period", "soon"], "--resync-period: 'soon' is not a number of seconds"),
        (["--metrics-addr", "nonsense"], "--metrics-addr"),
        (["--health-addr", ":99999"], "--health-addr"),
        (["--kubectl-download-url", "http://x/kubectl"], "--kubectl-download-sha256"),
        (["--log-format", "xml"], "--log-format"),
        (["--leader-elect-renew-deadline", "20"], "renew-deadline"),
        (
            ["--kueue-manage-jobs-without-queue-name"],
            "--kueue-manage-jobs-without-queue-name needs --kueue",
        ),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        parse_settings(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_health_server() -> None:
    ready = [False]
    hs = HealthServer(("127.0.0.1", 0), lambda: ready[0])
    hs.start()
    try:
        assert _get(hs.port, "/healthz") == (200, "ok\n")
        assert _get(hs.port, "/readyz") == (503, "informer caches not synced\n")
        ready[0] = True
        assert _get(hs.port, "/readyz") == (200, "ok\n")
        assert _get(hs.port, "/nope")[0] == 404
    finally:
        hs.stop()


def test_missing_kubeconfig_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.main",
            "--kubeconfig",
            str(missing),
            "--metrics-addr",
            "0",
            "--health-addr",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "cannot load Kubernetes configuration" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_console_scripts_are_installed() -> None:
    bindir = Path(sys.executable).parent
    for script in ("dgl-operator", "dglrun", "watcher-loop", "kubectl-download"):
        assert (bindir / script).exists(), f"{script} is not installed in {bindir}"
    out = subprocess.run(
        [str(bindir / "dgl-operator"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.startswith("dgl-operator ")


class _Refusing(FakeKube):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def list(self, *args: object, **kwargs: object) -> dict[str, object]:
        raise self.error


class _Missing(FakeKube):
    """An API server without one CRD."""

    def __init__(self, res: Resource) -> None:
        super().__init__()
        self.res = res

    def list(self, res: Resource, *args: Any, **kwargs: Any) -> Any:
        if res == self.res:
            raise NotFound(404, "NotFound", "the server could not find the requested resource")
        return super().list(res, *args, **kwargs)


def test_missing_crd_and_rbac_are_said_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stdout))
    try:
        assert not check_api(_Refusing(NotFound(404, "NotFound", "x")), None)
        assert "the DGLJob CRD (dgljobs.qihoo.net) is not installed" in capsys.readouterr().out
        assert not check_api(_Refusing(Forbidden(403, "Forbidden", "no")), "ns")
        assert "not allowed to list DGLJobs" in capsys.readouterr().out
        assert check_api(FakeKube(), None)
        # a CRD the settings need besides DGLJob's: named, and the flag that needs it
        for res, flags, said in (
            (
                PODGROUPS,
                BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS),
                "--gang-scheduling scheduler-plugins: the PodGroup CRD",
            ),
            (
                WORKLOADS,
                BuildOptions(kueue=True),
                "--kueue: the Workload CRD (workloads.kueue.x-k8s.io",
            ),
            (
                LOCALQUEUES,
                BuildOptions(kueue=True),
                "--kueue: the LocalQueue CRD (localqueues.kueue.x-k8s.io",
            ),
        ):
            missing = _Missing(res)
            assert not check_api(missing, "ns", flags)
            out = capsys.readouterr().out
            assert said in out and "is not installed" in out, out
            assert check_api(missing, "ns")  # (not needed without the flag)
    finally:
        structlog.reset_defaults()


# SIGTERM lands while the main thread is writing a log line (holding the log's write lock)
SIGNAL_MID_LOG_WRITE = """
import os, signal, sys
import structlog
from controller.main import Stop

class Tripwire:
    '''A log file whose first write is interrupted by SIGTERM.'''
    fired = False
    def write(self, text):
        if not self.fired:
            self.fired = True
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python runs the handler here, inside the write lock
                pass
        sys.__stderr__.write(text)
    def flush(self):
        sys.__stderr__.flush()

structlog.configure(logger_factory=structlog.PrintLoggerFactory(Tripwire()))
stop = Stop()
stop.install_signal_handlers()
structlog.get_logger().info("a line being written")
stop.wait_until_set()
print("stopped by", stop.reason, flush=True)
"""


def test_a_signal_during_a_log_write_stops_the_operator_without_deadlock() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_MID_LOG_WRITE],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "stopped by SIGTERM"
    assert "signal received" in proc.stderr and "a line being written" in proc.stderr
