"""Following the launcher's log across restarts, with a scripted API (the real one needs a
kubelet: e2e/test_storage.py follows a real restart)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dgl_operator.client.logs import LauncherLog, stamp
from kubeclient import NotFound, TransportError


def test_stamps_compare_in_time_order_with_trimmed_fractions() -> None:
    a, b, c = (stamp(t) for t in (
        "2026-11-26T10:00:01.25Z", "2026-11-26T10:00:01.5Z", "2026-11-26T10:00:02Z",
    ))  # fmt: skip
    assert a is not None and b is not None and c is not None
    assert a < b < c
    assert stamp("hello") is None and stamp("2026-11-26T10:00:01.x5Z") is None


def pod(uid: str, state: str) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid},
        "spec": {"containers": [{"name": "main"}, {"name": "sidecar"}]},
        "status": {"containerStatuses": [{"name": "main", "state": {state: {}}}]},
    }


class Lines:
    def __init__(self, lines: list[str], then: Any = None, breaks: bool = False) -> None:
        self.lines, self.then, self.breaks = lines, then, breaks

    def __iter__(self) -> Iterator[bytes]:
        for line in self.lines:
            yield (line + "\n").encode()
        if self.then:
            self.then()
        if self.breaks:
            raise TransportError("stream broke: reset")

    def close(self) -> None:
        pass


class ScriptedApi:
    """Launcher A logs two lines and is deleted; B starts, its stream breaks after one line,
    and the reopened stream sends that line again, then one more, and B ends."""

    def __init__(self) -> None:
        self.pod: dict[str, Any] | None = None
        self.gets = 0
        self.queries: list[dict[str, Any]] = []
        self.ended = False

    def get(self, res: Any, ns: str, name: str) -> dict[str, Any]:
        assert name == "j-launcher"
        self.gets += 1
        if self.gets == 2:
            self.pod = pod("A", "running")
        if self.pod is None and self.gets > 3:
            self.pod = pod("B", "running")
        if self.pod is None:
            raise NotFound(404, "NotFound", 'pods "j-launcher" not found')
        return self.pod

    def stream(self, res: Any, ns: str, name: str, sub: str, **kw: Any) -> Lines:
        assert sub == "log"
        q = kw["query"]
        self.queries.append(q)
        assert q["container"] == "main" and q["timestamps"] is True
        n = len(self.queries)
        if n == 1:
            return Lines(["2026-11-26T10:00:01.25Z [1/5] partition", "2026-11-26T10:00:01.5Z A2"],
                         then=lambda: setattr(self, "pod", None))  # fmt: skip
        if n == 2:
            return Lines(["2026-11-26T10:00:09Z [1/5] partition"], breaks=True)
        if n == 3:

            def end() -> None:
                self.pod = pod("B", "terminated")
                self.ended = True

            return Lines(["2026-11-26T10:00:09Z [1/5] partition", "2026-11-26T10:00:10.1Z done"],
                         then=end)  # fmt: skip
        return Lines([])


def test_it_follows_across_a_replaced_launcher_and_a_broken_stream() -> None:
    api = ScriptedApi()
    waits: list[str] = []
    log = LauncherLog(api, "ns", "j", job_ended=lambda: api.ended, poll=0,  # type: ignore[arg-type]
                      on_wait=waits.append)  # fmt: skip
    lines = list(log)
    assert lines == [
        "[1/5] partition",
        "A2",
        "--- j-launcher was replaced (launcher 2): its log follows",
        "[1/5] partition",
        "done",
    ]
    assert waits[0] == "waiting for j-launcher to be created"
    assert [q.get("sinceTime") for q in api.queries[:3]] == [None, None, "2026-11-26T10:00:09Z"]
    assert all(q["follow"] for q in api.queries[:3])


def test_without_follow_it_reads_what_there_is_once() -> None:
    api = ScriptedApi()
    api.gets = 1  # (launcher A exists at once)
    log = LauncherLog(api, "ns", "j", job_ended=lambda: False, follow=False, poll=0)  # type: ignore[arg-type]
    assert list(log) == ["[1/5] partition", "A2"]
    assert api.queries[0]["follow"] is False
