"""The wait itself: re-read the pod file until it is complete, then watch the listed pods.

Each listed pod is followed by name (:class:`~watcher_loop.pods.PodWatch`: one list+watch per
pod, ``fieldSelector=metadata.name=<pod>``, the only list/watch a Role limited to the job's pod
names allows), so dropped connections, expired resourceVersions (410) and throttling are
handled by the informers' reflector; nothing polls the API server. N pods are N watches (N
connections): the trade-off is in :mod:`watcher_loop.pods`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from kubeclient import KubeClient
from podprogram.log import Log
from watcher_loop.config import PROG, WatcherConfig
from watcher_loop.podfile import PodFileError, read_pod_file
from watcher_loop.pods import PodWatch
from watcher_loop.state import Mode, describe, evaluate

EXIT_OK = 0
EXIT_POD_FAILED = 1  # a listed pod can never reach the mode
EXIT_ERROR = 2  # bad configuration or pod file, or timed out
EXIT_STOPPED = 130  # the stop event was set (SIGTERM/SIGINT)

# How often the wait loop looks at the stop event while nothing changes.
_TICK = 0.25
_MAX_NAMES_SHOWN = 10


def _shorten(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_NAMES_SHOWN])
    more = len(items) - _MAX_NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _goal(mode: Mode) -> str:
    return "ready" if mode == Mode.READY else "finished (Succeeded)"


def wait_for_file(
    config: WatcherConfig, stop: threading.Event, log: Log, deadline: float | None
) -> list[str] | int:
    """Re-read the file until it is complete: the pod names, or an exit code."""
    last_why = ""
    while True:
        try:
            found = read_pod_file(config.file, config.expected_pods)
        except PodFileError as e:
            log.error(str(e))
            return EXIT_ERROR
        if found.complete:
            extra = ""
            if config.expected_pods is not None and len(found.names) > config.expected_pods:
                extra = f" (more than the {config.expected_pods} expected; waiting for all)"
            log.info(f"{config.file} lists {len(found.names)} pod(s){extra}")
            return found.names
        if found.why != last_why:
            log.info(f"waiting for {config.file}: {found.why}")
            last_why = found.why
        remaining = _remaining(deadline)
        if remaining is not None and remaining <= 0:
            log.error(
                f"timed out after {config.timeout:g}s waiting for {config.file} "
                f"to be complete: {found.why}"
            )
            return EXIT_ERROR
        wait = config.poll_interval if remaining is None else min(config.poll_interval, remaining)
        if stop.wait(wait):
            log.info("stopped")
            return EXIT_STOPPED


def wait_for_pods(
    config: WatcherConfig,
    client: KubeClient,
    names: list[str],
    stop: threading.Event,
    log: Log,
    deadline: float | None,
) -> int:
    """Watch the pods until every one reached the mode, one failed, or the deadline."""
    watch = PodWatch(client, config.namespace, names, name=PROG)
    watch.start()
    goal = _goal(config.mode)
    log.info(f"watching {len(names)} pod(s) in namespace {config.namespace} until {goal}")
    last_progress = ""
    try:
        while True:
            if stop.is_set():
                log.info("stopped")
                return EXIT_STOPPED
            watch.changed.clear()  # before reading: a later change wakes us again
            unlisted = watch.unlisted()
            if not unlisted:
                pods = watch.pods()
                outcome = evaluate(config.mode, names, pods)
                if outcome.failed is not None:
                    log.error(outcome.failed)
                    return EXIT_POD_FAILED
                if outcome.done:
                    log.info(f"all {len(names)} pod(s) are {goal}")
                    return EXIT_OK
                states = [f"{n} ({describe(pods.get(n))})" for n in outcome.waiting]
                progress = f"{len(outcome.waiting)} of {len(names)} pod(s): {_shorten(states)}"
            else:
                progress = (
                    f"{len(unlisted)} of {len(names)} pod(s) in namespace {config.namespace} "
                    f"could not be listed yet: {_shorten(unlisted)} (see the errors above, if any)"
                )
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                log.error(
                    f"timed out after {config.timeout:g}s waiting for pods to be {goal}; "
                    f"not there yet: {progress}"
                )
                return EXIT_ERROR
            if not unlisted and progress != last_progress:
                log.info(f"waiting for {progress}")
                last_progress = progress
            watch.changed.wait(_TICK if remaining is None else min(_TICK, remaining))
    finally:
        watch.stop()


def run(
    config: WatcherConfig,
    client: KubeClient,
    stop_event: threading.Event,
    *,
    log: Log | None = None,
) -> int:
    """Wait as ``config`` says; returns the exit code (see the ``EXIT_*`` constants)."""
    log = log or Log(PROG)
    deadline = None if config.timeout <= 0 else time.monotonic() + config.timeout
    names = wait_for_file(config, stop_event, log, deadline)
    if isinstance(names, int):
        return names
    return wait_for_pods(config, client, names, stop_event, log, deadline)
