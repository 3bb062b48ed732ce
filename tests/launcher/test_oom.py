"""Processes killed for memory: told apart from other SIGKILLs by the memory cgroup's OOM-kill
count, named with their pod, and turned into dglrun's ``OOMKilled: ...`` failure.

The root tests use a real memory cgroup and the kernel's real OOM killer."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.console import Console, OutOfMemory, PhaseError, Report, phase
from launcher.workers import oom
from launcher.workers import remote as remote_mod
from podcontract import OOM_PREFIX, logline
from tests.launcher.helpers import FIXTURES, dglrun, in_cgroup, memory_cgroup
from tests.support.paths import REPO

HOG = "x = bytearray(512 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1"


def cgroup_tree(tmp_path: Path, v2: bool, kills: int, limit: str) -> tuple[Path, Path]:
    """A cgroup filesystem with this process in /pod/c (as a test or the local transport
    sees it), and its /proc/self/cgroup."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc-cgroup"
    if v2:
        folder = root / "pod" / "c"
        folder.mkdir(parents=True)
        (folder / "memory.events").write_text(
            f"low 0\nhigh 0\nmax 3\noom {kills}\noom_kill {kills}\n"
        )
        (folder / "memory.max").write_text(limit + "\n")
        proc.write_text("0::/pod/c\n")
    else:
        folder = root / "memory" / "pod" / "c"
        folder.mkdir(parents=True)
        (folder / "memory.oom_control").write_text(
            f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n"
        )
        (folder / "memory.limit_in_bytes").write_text(limit + "\n")
        proc.write_text("5:devices:/pod/c\n4:memory:/pod/c\n0::/\n")
    return root, proc


@pytest.mark.parametrize("v2", [False, True], ids=["cgroup-v1", "cgroup-v2"])
def test_the_oom_kill_count_and_limit_are_read_from_the_processs_own_cgroup(
    tmp_path: Path, v2: bool
) -> None:
    root, proc = cgroup_tree(tmp_path, v2, kills=2, limit=str(900 << 20))
    assert oom.kills(root, proc) == 2
    assert oom.limit(root, proc) == 900 << 20
    assert oom.here(root, proc).limit == "900 MiB"
    # in a container the cgroup filesystem's root is the container's own cgroup
    inside = tmp_path / "container"
    folder = inside / ("" if v2 else "memory")
    folder.mkdir(parents=True)
    for f in (root / ("" if v2 else "memory") / "pod" / "c").iterdir():
        (folder / f.name).write_text(f.read_text())
    assert oom.kills(inside, proc) == 2


@pytest.mark.parametrize(("v2", "text"), [(False, str((1 << 63) - 4096)), (True, "max")])
def test_no_limit_and_no_cgroup_are_none(tmp_path: Path, v2: bool, text: str) -> None:
    root, proc = cgroup_tree(tmp_path, v2, kills=0, limit=text)
    assert oom.limit(root, proc) is None and oom.here(root, proc).limit == "none"
    assert oom.kills(tmp_path / "nowhere", proc) is None
    assert not oom.Watch(tmp_path / "nowhere", proc).killed(-signal.SIGKILL)


def test_only_a_sigkill_while_the_count_rose_is_a_kill_for_memory(tmp_path: Path) -> None:
    root, proc = cgroup_tree(tmp_path, False, kills=1, limit="1073741824")
    watch = oom.Watch(root, proc)
    assert not watch.killed(-signal.SIGKILL)  # killed, but not by the OOM killer
    (root / "memory" / "pod" / "c" / "memory.oom_control").write_text("oom_kill 2\n")
    assert watch.killed(-signal.SIGKILL) and watch.killed(128 + signal.SIGKILL)
    assert not watch.killed(1) and not watch.killed(-signal.SIGTERM)


def test_the_line_round_trips_and_the_console_reports_the_first_kill() -> None:
    killed = oom.Killed("job-worker-1", "1.50 GiB")
    text = oom._LINE.format(pod=killed.pod, limit=killed.limit)
    assert oom.parse_line(text) == killed and oom.parse_line("Epoch 00001 | Loss 0.5") is None
    out: list[str] = []
    console = Console(write=out.append)
    console.line("job-worker-0/server-0", "serving")
    assert console.out_of_memory() is None
    console.line("job-worker-1/trainer-0", "Epoch 00001")
    console.line("job-worker-1/trainer-0", text)
    console.line("job-worker-0/trainer-0", oom._LINE.format(pod="job-worker-0", limit="1 GiB"))
    # launcher.workers.remote's line is not what the trainer last said
    assert console.last_line("job-worker-1/trainer-0") == "Epoch 00001"
    assert console.out_of_memory() == (
        "OOMKilled: trainer-0 in pod job-worker-1 was killed for memory (over its container's "
        "memory limit, 1.50 GiB)"
    )
    # a phase that fails after it fails for that reason, the other error following
    with pytest.raises(OutOfMemory) as caught, phase(console, Report(), 5, "train"):
        raise PhaseError("trainer 0 on job-worker-1 exited with code 137")
    assert str(caught.value).startswith(OOM_PREFIX + "trainer-0 in pod job-worker-1 ")
    assert str(caught.value).endswith(
        "; train failed: trainer 0 on job-worker-1 exited with code 137"
    )


def test_a_phase_without_a_kill_fails_as_before() -> None:
    console = Console(write=lambda _: None)
    with pytest.raises(PhaseError) as caught, phase(console, Report(), 1, "partition"):
        raise PhaseError("boom")
    assert (
        not isinstance(caught.value, OutOfMemory) and str(caught.value) == "partition failed: boom"
    )


def remote(group: Path, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "launcher.workers.remote", "run", "--pidfile",
            str(tmp_path / "p.pid"),
            "--", sys.executable, "-c", code]  # fmt: skip
    return subprocess.run(
        in_cgroup(group, argv), capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_launcher_remote_names_a_real_oom_kill_and_only_that(tmp_path: Path) -> None:
    """A child over its cgroup's 96 MiB is killed by the kernel: launcher.workers.remote says so,
    naming this machine as the pod; a child that SIGKILLs itself is not reported."""
    with memory_cgroup(96) as group:
        hog = remote(group, HOG, tmp_path)
        self_kill = remote(
            group, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", tmp_path
        )
    assert hog.returncode == 128 + signal.SIGKILL, hog.stderr
    lines = hog.stderr.strip().splitlines()
    killed = oom.parse_line(lines[-2])
    assert killed == oom.Killed(oom.pod_name(), "96 MiB"), lines
    assert lines[-1].startswith("launcher.remote: peak memory ")  # still the last word
    assert self_kill.returncode == 128 + signal.SIGKILL
    assert "killed for memory" not in self_kill.stderr, self_kill.stderr


def test_dglrun_ends_oomkilled_naming_the_trainer_and_its_worker(
    tmp_path: Path, no_leftovers: None
) -> None:
    """Two local workers in a 400 MiB cgroup; trainer 1 touches 1 GiB: the kernel kills it,
    dglrun stops everything and its last line (the pod's termination message) starts
    ``OOMKilled:`` and names the trainer and its worker."""
    args = ["--transport", "local", "-g", "g", "--num-partitions", "2",
            "--partition-entry-point", str(FIXTURES / "fake_partition.py"),
            "--train-entry-point", str(FIXTURES / "fake_train.py"),
            "--workspace", str(tmp_path), "--train-args", "--sleep 60"]  # fmt: skip
    with memory_cgroup(400) as group:
        proc = dglrun(*args, env={"FAKE_HOG_RANK": "1", "FAKE_HOG_MB": "1024"}, cgroup=group)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith(
        "dglrun: error: OOMKilled: trainer-0 in pod worker-1 was killed for memory (over its "
        "container's memory limit, 400 MiB); train failed: trainer 0 on worker-1"
    ), last
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("v2", [False, True], ids=["cgroup-v1", "cgroup-v2"])
def test_what_the_pods_processes_hold_is_anon_and_shared_memory(tmp_path: Path, v2: bool) -> None:
    root, proc = cgroup_tree(tmp_path, v2, kills=0, limit="max")
    folder = root / ("" if v2 else "memory") / "pod" / "c"
    stat = (
        "anon 1000\nfile 99999\nshmem 24\n"
        if v2
        else "rss 7\nshmem 3\ncache 99999\ntotal_rss 1000\ntotal_shmem 24\ntotal_cache 99999\n"
    )
    (folder / "memory.stat").write_text(stat)
    assert oom.held(root, proc) == 1024  # (the page cache not counted)
    (folder / "memory.stat").write_text("nothing 1\n")
    assert oom.held(root, proc) is None
    assert oom.held(tmp_path / "nowhere", proc) is None


SAMPLED = "x = bytearray(64 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\nimport time\n" \
    "time.sleep(1.5)"  # fmt: skip


def test_launcher_remote_samples_its_pods_memory_in_a_pod_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a pod (KUBERNETES_SERVICE_HOST set), launcher.workers.remote says what its memory
    cgroup holds every DGLRUN_MEMORY_SAMPLE_SECONDS while its command runs (dglctl report's
    memory plot); the console keeps the samples out of what a process last said."""
    monkeypatch.setenv(logline.SAMPLE_ENV, "0.3")
    with memory_cgroup(256) as group:
        monkeypatch.setenv(remote_mod.POD_ENV, "10.96.0.1")
        in_pod = remote(group, SAMPLED, tmp_path)
        monkeypatch.delenv(remote_mod.POD_ENV)
        outside = remote(group, SAMPLED, tmp_path)
    assert in_pod.returncode == 0, in_pod.stderr
    samples = [logline.memory_mib(ln) for ln in in_pod.stderr.splitlines()]
    figures = [s for s in samples if s is not None]
    assert len(figures) >= 2 and max(figures) >= 60, in_pod.stderr  # the 64 MiB it holds
    assert outside.returncode == 0 and "memory sample" not in outside.stderr, outside.stderr
    out: list[str] = []
    console = Console(write=out.append)
    console.line("job-worker-0/trainer-0", "epoch 0 loss 1.0")
    console.line("job-worker-0/trainer-0", logline.MEMORY_LINE.format(mib=812.4))
    assert console.last_line("job-worker-0/trainer-0") == "epoch 0 loss 1.0"
    assert out[-1] == "[job-worker-0/trainer-0] memory sample: 812 MiB"
