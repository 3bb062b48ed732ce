"""The wait itself: re-read the pod file until it is complete, then watch the listed pods.

The pods are followed with a list+watch through the project's informers (a ``SharedInformer``
over a ``ListWatch``), so dropped connections, expired resourceVersions (410) and throttling
are handled by the reflector; nothing polls the API server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from informers.listwatch import ListWatch
from informers.shared import EventHandler, SharedInformer
from kubeclient import PODS, KubeClient, Obj
from podprogram.log import Log
from watcher_loop.config import PROG, WatcherConfig
from watcher_loop.podfile import PodFileError, read_pod_file
from watcher_loop.state import Mode, describe, evaluate

EXIT_OK = 0
EXIT_POD_FAILED = 1  # a listed pod can never reach the mode
EXIT_ERROR = 2  # bad configuration or pod file, or timed out
EXIT_STOPPED = 130  # the stop event was set (SIGTERM/SIGINT)

REPLICA_NAME_LABEL = "dgl-replica-name"  # set by the operator on every pod it creates
# Above this length the watch selects every pod carrying the label and filters by name here,
# rather than sending a URL that proxies and load balancers in front of the API server may
# refuse (thousands of workers).
MAX_SELECTOR_LENGTH = 4096
# How often the wait loop looks at the stop event while nothing changes.
_TICK = 0.25
_MAX_NAMES_SHOWN = 10


def label_selector(names: Sequence[str]) -> str:
    """``dgl-replica-name in (a,b,...)``, or just ``dgl-replica-name`` when that is too long."""
    selector = f"{REPLICA_NAME_LABEL} in ({','.join(names)})"
    return selector if len(selector) <= MAX_SELECTOR_LENGTH else REPLICA_NAME_LABEL


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


def _pods_by_name(objs: Iterable[Obj], namespace: str, names: set[str]) -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for obj in objs:
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if name in names and meta.get("namespace", namespace) == namespace:
            out[str(name)] = obj
    return out


def wait_for_pods(
    config: WatcherConfig,
    client: KubeClient,
    names: list[str],
    stop: threading.Event,
    log: Log,
    deadline: float | None,
) -> int:
    """Watch the pods until every one reached the mode, one failed, or the deadline."""
    lw = ListWatch(client, PODS, namespace=config.namespace, label_selector=label_selector(names))
    informer = SharedInformer(lw, name=f"{PROG} pods in {config.namespace}")
    changed = threading.Event()

    def poke(*_: Any) -> None:
        changed.set()

    informer.add_event_handler(EventHandler(on_add=poke, on_update=poke, on_delete=poke))
    informer_stop = threading.Event()
    thread = informer.start(informer_stop)
    wanted = set(names)
    goal = _goal(config.mode)
    log.info(f"watching {len(names)} pod(s) in namespace {config.namespace} until {goal}")
    last_progress = ""
    try:
        while True:
            if stop.is_set():
                log.info("stopped")
                return EXIT_STOPPED
            synced = informer.has_synced()
            if synced:
                changed.clear()  # before reading the store: a later change wakes us again
                pods = _pods_by_name(informer.store.list(), config.namespace, wanted)
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
                    f"the pods in namespace {config.namespace} could not be listed yet "
                    "(see the errors above, if any)"
                )
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                log.error(
                    f"timed out after {config.timeout:g}s waiting for pods to be {goal}; "
                    f"not there yet: {progress}"
                )
                return EXIT_ERROR
            if synced and progress != last_progress:
                log.info(f"waiting for {progress}")
                last_progress = progress
            wait = _TICK if remaining is None else min(_TICK, remaining)
            if synced:
                changed.wait(wait)
            else:
                informer.wait_for_sync(wait)
    finally:
        informer_stop.set()
        thread.join(5.0)


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
