"""run() against the in-memory API server, with real threads and a real watch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kubeclient import PODS, Forbidden, KubeClient, TransportError
from tests.fakekube import FakeKube
from tests.watcher_loop.helpers import (
    NS,
    ByNameOnly,
    Running,
    hostfile,
    pod,
    status,
    write_atomically,
)
from watcher_loop.config import WatcherConfig
from watcher_loop.loop import EXIT_ERROR, EXIT_OK, EXIT_POD_FAILED, EXIT_STOPPED
from watcher_loop.pods import name_selector
from watcher_loop.state import Mode

Start = Callable[[WatcherConfig, KubeClient], Running]
WORKERS = ["job-worker-0", "job-worker-1"]


def config(
    file: Path, mode: Mode = Mode.READY, *, expected_pods: int | None = None, timeout: float = 0.0
) -> WatcherConfig:
    return WatcherConfig(
        file=file,
        mode=mode,
        namespace=NS,
        expected_pods=expected_pods,
        timeout=timeout,
        poll_interval=0.02,
    )


@pytest.fixture
def workers_file(tmp_path: Path) -> Path:
    f = tmp_path / "hostfile"
    f.write_text(hostfile(*WORKERS))
    return f


def set_status(kube: FakeKube, name: str, phase: str, ready: bool = False, **extra: object) -> None:
    kube.patch(PODS, NS, name, {"status": status(phase, ready, **extra)})


def test_waits_until_every_pod_is_ready(kube: FakeKube, workers_file: Path, start: Start) -> None:
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Pending"))
    r = start(config(workers_file, expected_pods=2), kube)
    assert kube.wait_for_watches(2)  # one watch per pod
    r.wait_output("waiting for 2 of 2 pod(s): job-worker-0 (Pending), job-worker-1 (Pending)")

    set_status(kube, "job-worker-0", "Running", ready=True)
    set_status(kube, "job-worker-1", "Running", ready=False)
    r.wait_output("waiting for 1 of 2 pod(s): job-worker-1 (Running, not ready)")
    assert not r.finished.is_set()

    set_status(kube, "job-worker-1", "Running", ready=True)
    assert r.wait() == EXIT_OK
    assert "all 2 pod(s) are ready" in r.output
    # It watched: one list per pod, then events; no polling of the API server.
    verbs = [a.verb for a in kube.actions]
    assert verbs[:2] == ["create", "create"]
    assert sorted(verbs[2:6]) == ["list", "list", "watch", "watch"]
    assert verbs[6:] == ["patch"] * 3


def test_finished_mode(kube: FakeKube, tmp_path: Path, start: Start) -> None:
    f = tmp_path / "partfile"
    f.write_text("10.0.0.9 30050 job-partitioner\n")
    kube.create(PODS, NS, pod("job-partitioner", "Running", True))
    r = start(config(f, Mode.FINISHED, expected_pods=1), kube)
    assert kube.wait_for_watches(1)  # its one pod
    r.wait_output("job-partitioner (Running)")
    assert not r.finished.is_set()
    set_status(kube, "job-partitioner", "Succeeded")
    assert r.wait() == EXIT_OK
    assert "all 1 pod(s) are finished (Succeeded)" in r.output


def test_already_there_at_start(kube: FakeKube, workers_file: Path, start: Start) -> None:
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Running", True))
    assert start(config(workers_file), kube).wait() == EXIT_OK


def test_a_failed_pod_fails_fast_naming_it(
    kube: FakeKube, workers_file: Path, start: Start
) -> None:
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Pending"))
    r = start(config(workers_file), kube)
    assert kube.wait_for_watches(2)
    terminated = {"exitCode": 137, "reason": "OOMKilled"}
    failed_at = time.monotonic()
    set_status(
        kube,
        "job-worker-1",
        "Failed",
        containerStatuses=[{"name": "main", "state": {"terminated": terminated}}],
    )
    assert r.wait() == EXIT_POD_FAILED
    assert r.finished_at - failed_at < 1.0
    expected = "pod job-worker-1 is Failed: container main exited with code 137 (OOMKilled)"
    assert f"watcher-loop: error: {expected}" in r.output
    assert r.log.last_error == expected


def test_a_succeeded_pod_can_never_become_ready(
    kube: FakeKube, workers_file: Path, start: Start
) -> None:
    kube.create(PODS, NS, pod("job-worker-0", "Running", True))
    kube.create(PODS, NS, pod("job-worker-1", "Succeeded"))
    r = start(config(workers_file), kube)
    assert r.wait() == EXIT_POD_FAILED
    assert "pod job-worker-1 is Succeeded" in r.output


def test_times_out_listing_the_pods_not_there(kube: FakeKube, tmp_path: Path, start: Start) -> None:
    f = tmp_path / "hostfile"
    f.write_text(hostfile("w-0", "w-1", "w-2"))
    kube.create(PODS, NS, pod("w-0", "Running", True))
    kube.create(PODS, NS, pod("w-1", "Pending"))
    r = start(config(f, timeout=0.5), kube)
    assert r.wait(5) == EXIT_ERROR
    assert 0.5 <= r.finished_at - r.started_at < 2.0
    assert r.log.last_error == (
        "timed out after 0.5s waiting for pods to be ready; "
        "not there yet: 2 of 3 pod(s): w-1 (Pending), w-2 (not found)"
    )


def test_times_out_waiting_for_the_file(tmp_path: Path, kube: FakeKube, start: Start) -> None:
    f = tmp_path / "hostfile"
    f.write_text(hostfile("w-0"))
    r = start(config(f, timeout=0.3, expected_pods=2), kube)
    assert r.wait() == EXIT_ERROR
    assert r.log.last_error == (
        f"timed out after 0.3s waiting for {f} to be complete: the file lists 1 of 2 pods"
    )
    assert kube.actions == []  # never got as far as the API


def test_missing_then_short_file_is_reread_until_complete(
    kube: FakeKube, tmp_path: Path, start: Start
) -> None:
    """The original read the file once and exited at once when it was empty (its issue #15)."""
    f = tmp_path / "hostfile"
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Running", True))
    r = start(config(f, expected_pods=2), kube)
    r.wait_output(f"waiting for {f}: the file does not exist yet")

    write_atomically(f, "")
    r.wait_output(f"waiting for {f}: the file lists no pods yet")
    write_atomically(f, hostfile(WORKERS[0]))
    r.wait_output(f"waiting for {f}: the file lists 1 of 2 pods")
    assert not r.finished.is_set()
    assert kube.actions == [a for a in kube.actions if a.verb == "create"]

    write_atomically(f, hostfile(*WORKERS))
    assert r.wait() == EXIT_OK
    assert f"{f} lists 2 pod(s)" in r.output


def test_empty_file_without_expected_count_is_waited_for(
    kube: FakeKube, tmp_path: Path, start: Start
) -> None:
    f = tmp_path / "partfile"
    f.write_text("")
    kube.create(PODS, NS, pod("job-partitioner", "Succeeded"))
    r = start(config(f, Mode.FINISHED), kube)
    r.wait_output("the file lists no pods yet")
    assert not r.finished.is_set()
    write_atomically(f, "10.0.0.3 30050 job-partitioner\n")
    assert r.wait() == EXIT_OK


def test_pods_outside_the_list_do_not_matter(kube: FakeKube, tmp_path: Path, start: Start) -> None:
    f = tmp_path / "hostfile"
    f.write_text("10.0.0.1 30050 job-launcher\n" + hostfile("w-0"))
    kube.create(PODS, NS, pod("job-launcher", "Failed"))  # listed, but a launcher
    kube.create(PODS, NS, pod("w-9", "Failed"))  # same label key, not listed
    kube.create(PODS, NS, pod("w-8", "Failed", labels={}))  # unlabelled
    kube.create(PODS, "elsewhere", pod("w-0", "Failed", namespace="elsewhere"))
    kube.create(PODS, NS, pod("w-0", "Pending"))
    r = start(config(f), kube)
    r.wait_output("waiting for 1 of 1 pod(s): w-0 (Pending)")
    kube.create(PODS, NS, pod("w-7", "Failed"))
    set_status(kube, "w-0", "Running", ready=True)
    assert r.wait() == EXIT_OK


def test_pod_created_later_is_seen(kube: FakeKube, workers_file: Path, start: Start) -> None:
    r = start(config(workers_file), kube)
    r.wait_output("job-worker-0 (not found), job-worker-1 (not found)")
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Running", True))
    assert r.wait() == EXIT_OK


def test_survives_a_broken_watch(kube: FakeKube, workers_file: Path, start: Start) -> None:
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Pending"))
    r = start(config(workers_file), kube)
    assert kube.wait_for_watches(2)
    kube.break_watches()
    for n in WORKERS:
        set_status(kube, n, "Running", ready=True)  # while the watch is down
    assert r.wait(10) == EXIT_OK


def test_survives_a_failed_list(kube: FakeKube, workers_file: Path, start: Start) -> None:
    kube.fail_next("list", PODS, TransportError("connection refused (injected)"))
    for n in WORKERS:
        kube.create(PODS, NS, pod(n, "Running", True))
    r = start(config(workers_file), kube)
    assert r.wait(10) == EXIT_OK
    # one list per pod, and the failed one again
    assert [a.verb for a in kube.actions if a.verb == "list"] == ["list"] * (len(WORKERS) + 1)


def test_times_out_when_the_pods_cannot_be_listed(
    kube: FakeKube, workers_file: Path, start: Start
) -> None:
    kube.fail_next("list", PODS, TransportError("connection refused (injected)"), times=100)
    r = start(config(workers_file, timeout=0.3), kube)
    assert r.wait() == EXIT_ERROR
    assert r.log.last_error == (
        "timed out after 0.3s waiting for pods to be ready; not there yet: 2 of 2 pod(s) in "
        f"namespace {NS} could not be listed yet: job-worker-0, job-worker-1 "
        "(see the errors above, if any)"
    )


def test_malformed_file_is_a_configuration_error(
    kube: FakeKube, tmp_path: Path, start: Start
) -> None:
    f = tmp_path / "hostfile"
    f.write_text(hostfile("w-0") + "10.0.0.2 30050\n")
    r = start(config(f), kube)
    assert r.wait() == EXIT_ERROR
    assert r.log.last_error is not None
    assert r.log.last_error.startswith(f"{f} line 2: expected <ip> <port> <pod-name>")


def test_stop_event_ends_the_wait(kube: FakeKube, workers_file: Path, start: Start) -> None:
    r = start(config(workers_file), kube)
    assert kube.wait_for_watches(2)
    r.stop.set()
    assert r.wait(2) == EXIT_STOPPED
    assert kube.open_watches() == 0  # every reflector stopped and closed its watch


def test_stop_event_while_waiting_for_the_file(
    tmp_path: Path, kube: FakeKube, start: Start
) -> None:
    r = start(config(tmp_path / "missing"), kube)
    r.wait_output("does not exist yet")
    r.stop.set()
    assert r.wait(2) == EXIT_STOPPED


def test_name_selector() -> None:
    assert name_selector("job-worker-1") == "metadata.name=job-worker-1"


def test_follows_each_pod_by_name_as_a_by_name_role_allows(
    kube: FakeKube, tmp_path: Path, start: Start
) -> None:
    """A Role with ``resourceNames`` allows a list/watch only with ``metadata.name=<pod>``
    (:class:`ByNameOnly` answers as it does): watcher-loop asks for nothing else, for many pods."""
    names = [f"job-worker-{i}" for i in range(300)]
    f = tmp_path / "hostfile"
    f.write_text(hostfile(*names))
    for n in names:
        kube.create(PODS, NS, pod(n, "Pending"))
    kube.create(PODS, NS, pod("other-job-worker-0", "Failed"))  # not listed, not allowed
    api = ByNameOnly(kube, names)
    threads = threading.active_count()
    r = start(config(f, expected_pods=len(names)), api)
    assert kube.wait_for_watches(len(names)), r.output
    r.wait_output("waiting for 300 of 300 pod(s)")
    # one thread per pod (its reflector) and run()'s own: none to close each watch on stop
    assert threading.active_count() - threads <= len(names) + 1
    for n in names:
        set_status(kube, n, "Running", ready=True)
    assert r.wait(20) == EXIT_OK, r.output
    assert api.refused == []
    assert sorted(api.selectors["list"]) == sorted(name_selector(n) for n in names)
    assert sorted(api.selectors["watch"]) == sorted(name_selector(n) for n in names)


def test_by_name_role_refuses_a_label_selector_and_other_pods(kube: FakeKube) -> None:
    """The twin: :class:`ByNameOnly` does refuse what the old label-selector watch asked, and
    a pod it does not name, so the test above can fail."""
    kube.create(PODS, NS, pod("job-worker-0", "Running", True))
    kube.create(PODS, NS, pod("other-job-worker-0", "Running", True))
    api = ByNameOnly(kube, ["job-worker-0"])
    with pytest.raises(Forbidden):
        api.list(PODS, NS, label_selector="dgl-replica-name in (job-worker-0)")
    with pytest.raises(Forbidden):
        api.watch(PODS, NS, label_selector="dgl-replica-name in (job-worker-0)")
    with pytest.raises(Forbidden):
        api.list(PODS, NS, field_selector=name_selector("other-job-worker-0"))
    assert [
        p["metadata"]["name"]
        for p in api.list(PODS, NS, field_selector=name_selector("job-worker-0"))["items"]
    ] == ["job-worker-0"]


def test_a_pod_the_role_does_not_name_is_waited_for_then_named(
    kube: FakeKube, tmp_path: Path, start: Start
) -> None:
    """Refused for one pod (403), the others still followed: the time-out names that pod."""
    f = tmp_path / "hostfile"
    f.write_text(hostfile("w-0", "w-1"))
    for n in ("w-0", "w-1"):
        kube.create(PODS, NS, pod(n, "Running", True))
    api = ByNameOnly(kube, ["w-0"])
    r = start(config(f, timeout=0.5), api)
    assert r.wait(5) == EXIT_ERROR
    assert r.log.last_error == (
        "timed out after 0.5s waiting for pods to be ready; not there yet: 1 of 2 pod(s) in "
        f"namespace {NS} could not be listed yet: w-1 (see the errors above, if any)"
    )
    assert name_selector("w-1") in api.refused
