"""Following a DGLJob's launcher log (dglrun's ``[k/5]`` lines, every worker's output) from
the first line to the job's end, across the launcher pods a restart replaces.

The launcher is the pod ``<job>-launcher``; a restart deletes it and makes a new one of the
same name (a new uid). The log is read with the kubelet's timestamps: a stream that breaks
(a quiet launcher past the read timeout, a kubelet that went away) is opened again from the
last line's time and the lines already given are skipped, and a new uid starts from its first
line, after a line saying the launcher was replaced. It ends once the job has ended and the
last launcher's container has ended and been read to its end (or is gone).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubeclient import PODS, ApiError, NotFound, RestClient, TransportError

READ_TIMEOUT = 30.0  # seconds without a byte before the stream is opened again
POLL = 2.0

Stamp = tuple[str, int]  # (date-time to the second, nanoseconds): comparable


def stamp(text: str) -> Stamp | None:
    """The kubelet's RFC 3339 timestamp (trailing zeros of the fraction trimmed) as a pair
    that compares in time order; None if it is not one."""
    if len(text) < 20 or not text.endswith("Z"):
        return None
    whole, _, frac = text[:-1].partition(".")
    if not frac.isdigit() and frac:
        return None
    return whole, int((frac or "0").ljust(9, "0")[:9])


def since_time(s: Stamp) -> str:
    return f"{s[0]}Z"


def main_container(pod: dict[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("name") or "")


def _state(pod: dict[str, Any], container: str) -> dict[str, Any]:
    """The container's ``state`` (``{"running": ...}``, ...; empty before it has one)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return dict(cs.get("state") or {})
    return {}


def started(pod: dict[str, Any], container: str) -> bool:
    """The container runs or ran (there is a log to read)."""
    state = _state(pod, container)
    return "running" in state or "terminated" in state


def terminated(pod: dict[str, Any], container: str) -> bool:
    return "terminated" in _state(pod, container)


class LauncherLog:
    """One follow of ``<job>-launcher``'s log; iterate for its lines (without ``\\n``).

    ``job_ended()`` says whether the job ended (Succeeded or Failed; it raises when the job is
    gone); ``on_wait`` hears what is being waited for while no launcher log can be read.
    """

    def __init__(
        self,
        api: RestClient,
        namespace: str,
        job: str,
        *,
        job_ended: Callable[[], bool],
        follow: bool = True,
        on_wait: Callable[[str], None] | None = None,
        poll: float = POLL,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        self.api, self.namespace, self.pod = api, namespace, f"{job}-launcher"
        self.job_ended, self.follow, self.on_wait = job_ended, follow, on_wait
        self.poll, self.read_timeout = poll, read_timeout
        self.last: dict[str, Stamp] = {}  # uid -> the last line's stamp
        self.done: set[str] = set()  # uids read to their container's end
        self.launchers = 0

    def _get_pod(self) -> dict[str, Any] | None:
        try:
            return self.api.get(PODS, self.namespace, self.pod)
        except NotFound:
            return None

    def _read(self, uid: str, container: str) -> Iterator[str]:
        """The pod's lines after the last one given; returns when the stream ends."""
        query: dict[str, Any] = {"container": container, "timestamps": True, "follow": self.follow}
        after = self.last.get(uid)
        if after is not None:
            query["sinceTime"] = since_time(after)
        stream = self.api.stream(
            PODS, self.namespace, self.pod, "log", query=query, read_timeout=self.read_timeout
        )
        try:
            for raw in stream:
                line = raw.decode(errors="replace").rstrip("\n")
                ts, _, text = line.partition(" ")
                s = stamp(ts)
                if s is None:  # (not the kubelet's timestamp: give the line as it came)
                    yield line
                    continue
                if after is not None and s <= after:
                    continue
                self.last[uid] = s
                yield text
        finally:
            stream.close()

    def __iter__(self) -> Iterator[str]:
        waited = ""
        while True:
            pod = self._get_pod()
            uid = str((pod or {}).get("metadata", {}).get("uid") or "")
            container = main_container(pod) if pod else ""
            if pod and uid not in self.done and started(pod, container):
                if uid not in self.last:
                    self.launchers += 1
                    if self.launchers > 1:
                        n = self.launchers
                        yield f"--- {self.pod} was replaced (launcher {n}): its log follows"
                was_done = terminated(pod, container)
                try:
                    yield from self._read(uid, container)
                except (TransportError, NotFound):
                    pass  # (broke, or the pod went: look again)
                except ApiError as e:
                    if e.status != 400:  # 400: the container is not there yet / any more
                        raise
                if was_done or not self.follow:
                    self.done.add(uid)
                    if not self.follow:
                        return
                elif self.job_ended():
                    # the job ended while this launcher ran (a worker failed, a deadline): its
                    # last lines, then stop (with cleanPodPolicy None it may run on)
                    self.follow = False
                    with contextlib.suppress(TransportError, NotFound):
                        yield from self._read(uid, container)
                    return
                continue
            if not self.follow and (pod is None or not started(pod, container)):
                return
            if self.job_ended() and (
                pod is None or uid in self.done or not started(pod, container)
            ):
                return
            what = f"waiting for {self.pod}" + (" to start" if pod else " to be created")
            if what != waited and self.on_wait is not None:
                self.on_wait(what)
            waited = what
            time.sleep(self.poll)
