"""Helpers for the watcher-loop tests: real-time polling, pods, a background run()."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kubeclient import PODS, Forbidden, KubeClient, Obj, Resource, WatchStream
from podprogram.log import Log
from tests.support.waiting import wait_for
from watcher_loop.config import PROG, WatcherConfig
from watcher_loop.loop import run

NS = "team"


def status(phase: str, ready: bool = False, **extra: Any) -> Obj:
    return {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        **extra,
    }


def pod(
    name: str,
    phase: str = "Pending",
    ready: bool = False,
    *,
    namespace: str = NS,
    labels: dict[str, str] | None = None,
    **status_extra: Any,
) -> Obj:
    """A pod as the operator labels it (``dgl-replica-name=<name>``)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"dgl-replica-name": name} if labels is None else labels,
        },
        "status": status(phase, ready, **status_extra),
    }


def hostfile(*names: str, slots: int = 1) -> str:
    return "".join(
        f"10.0.{i // 250}.{i % 250 + 1} 30050 {n} slots={slots}\n" for i, n in enumerate(names)
    )


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` in one step, as the kubelet swaps a ConfigMap volume's content."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)


class ByNameOnly:
    """A client as a Role with ``pods: get,list,watch`` and ``resourceNames: names`` makes it:
    a list or watch of pods is refused (403) unless it selects one of ``names`` with
    ``fieldSelector=metadata.name=<name>`` (Kubernetes' RBAC authorizes no other). Records the
    field selectors asked for (``selectors[verb]``) and those refused (``refused``)."""

    def __init__(self, kube: KubeClient, names: list[str]) -> None:
        self.kube = kube
        self.allowed = {f"metadata.name={n}" for n in names}
        self.selectors: dict[str, list[str]] = {"list": [], "watch": []}
        self.refused: list[str] = []
        self._lock = threading.Lock()

    def _authorize(self, verb: str, res: Resource, kwargs: dict[str, Any]) -> None:
        selector = str(kwargs.get("field_selector") or "")
        with self._lock:
            self.selectors[verb].append(selector)
            if res == PODS and selector not in self.allowed:
                self.refused.append(selector)
                raise Forbidden(403, "Forbidden", f"cannot {verb} pods [{selector or '*'}]")

    def list(self, res: Resource, namespace: str | None = None, **kwargs: Any) -> Obj:
        self._authorize("list", res, kwargs)
        return self.kube.list(res, namespace, **kwargs)

    def watch(self, res: Resource, namespace: str | None = None, **kwargs: Any) -> WatchStream:
        self._authorize("watch", res, kwargs)
        return self.kube.watch(res, namespace, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)


class Running:
    """``run(config, client, stop)`` on a background thread."""

    def __init__(self, config: WatcherConfig, client: KubeClient) -> None:
        self.config = config
        self.stream = io.StringIO()
        self.log = Log(PROG, self.stream)
        self.stop = threading.Event()
        self.result: int | None = None
        self.finished = threading.Event()
        self.started_at = time.monotonic()
        self.finished_at = 0.0
        self.thread = threading.Thread(target=self._run, args=(client,), daemon=True)
        self.thread.start()

    def _run(self, client: KubeClient) -> None:
        try:
            self.result = run(self.config, client, self.stop, log=self.log)
        finally:
            self.finished_at = time.monotonic()
            self.finished.set()

    @property
    def output(self) -> str:
        return self.stream.getvalue()

    def wait(self, timeout: float = 5.0) -> int:
        """The exit code; fails the test if run() has not returned within ``timeout``."""
        if not self.finished.wait(timeout):
            pytest.fail(f"run() did not return within {timeout}s; output so far:\n{self.output}")
        assert self.result is not None, self.output
        return self.result

    def wait_output(self, text: str, timeout: float = 5.0) -> None:
        """Wait until run() has written ``text``; the failure shows the output at the end."""
        try:
            wait_for(lambda: text in self.output, what=f"{text!r} in the output", timeout=timeout)
        except AssertionError as e:
            pytest.fail(f"{e}; output so far:\n{self.output}")
