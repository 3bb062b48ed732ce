"""A DGLJob of two attempts as ``dglctl report`` reads it (tests/client's readings, tests/browser's
page): its object, its pods (the second attempt's), the Events of both (the first attempt's
worker-1, deleted, known only by its Events) and dglrun's stamped logs; times from :data:`T0`."""

from __future__ import annotations

from typing import Any

from dgl_operator.report.readings import DglrunLog, Readings, read, stamped_lines, timestamp
from podcontract import logline

T0 = timestamp("2026-11-28T10:00:00Z") or 0.0


def at(s: float) -> str:
    return logline.stamp(T0 + s)


def log(pod: str, attempt: int, lines: list[tuple[float, str]]) -> DglrunLog:
    return DglrunLog(pod, stamped_lines(f"{at(t)} {text}" for t, text in lines), attempt)


def launcher_log(attempt: int, t: float, first_epoch: int, epochs: int) -> DglrunLog:
    lines = [
        (t, "[1/5] partition"),
        (t + 1, "[launcher] memory sample: 300 MiB"),
        (t + 2, "[partition] [distpart] memory read: peak 10 / 11 MiB, after 5 / 5 MiB "
                "(ranks 0..1); sent 1 / 2 MiB to the other ranks"),
        (t + 3, "  ranks' steps: read 1.5s, total 3.0s"),
        (t + 4, "  edge cut 125 (12.50% of 1000 edges)"),
        (t + 5, "[1/5] partition done in 5.0s"),
        (t + 5, "[2/5] deliver"),
        (t + 6, "[worker-1/pull] pull: part 1: 4096/4096 bytes (100%)"),
        (t + 7, "[2/5] deliver done in 2.0s"),
        (t + 7, "[5/5] train"),
        (t + 8, "[cut-worker-0/server-0] memory sample: 800 MiB"),
        (t + 8.2, "[cut-worker-0/trainer-0] memory sample: 820 MiB"),
        (t + 9, "[worker-1/trainer-0] memory sample: 700 MiB"),
    ]  # fmt: skip
    now = t + 7
    for e in range(first_epoch, epochs):
        now += 10
        extra = " val_acc 0.8 test_acc 0.79" if e == epochs - 1 else ""
        lines.append((now, f"[worker-0/trainer-0] [rank 0] epoch {e} loss 1.0 nodes 10 time 8.00s"
                           + extra))  # fmt: skip
        lines.append((now + 0.1, f"[worker-1/trainer-0] [rank 1] epoch {e} loss 1.0 time 8.00s"))
    if first_epoch == 0:  # (the first attempt is cut short in its third epoch)
        lines.append((now + 5, "[launcher] memory sample: 310 MiB"))
        return log("launcher", attempt, lines)
    lines.append((now + 3, "[5/5] train done in 40.0s"))
    return log("launcher", attempt, lines)


def pod(name: str, uid: str, node: str, start: float, end: float | None) -> dict[str, Any]:
    state: dict[str, Any] = {"running": {"startedAt": at(start)}}
    if end is not None:
        state = {"terminated": {"startedAt": at(start), "finishedAt": at(end)}}
    return {
        "metadata": {"name": f"cut-{name}", "uid": uid, "creationTimestamp": at(start - 2)},
        "spec": {"nodeName": node, "containers": [{"name": "dgl-graphsage"}]},
        "status": {"containerStatuses": [{"name": "dgl-graphsage", "state": state}]},
    }


def event(kind: str, name: str, uid: str, reason: str, t: float, message: str = "",
          path: str = "") -> dict[str, Any]:  # fmt: skip
    return {
        "involvedObject": {"kind": kind, "name": name, "uid": uid, "fieldPath": path},
        "reason": reason,
        "message": message,
        "type": "Warning" if reason in ("Killing", "DGLJobRestarting") else "Normal",
        "lastTimestamp": at(t).split(".")[0] + "Z",
    }


def job() -> dict[str, Any]:
    return {
        "metadata": {"name": "cut", "namespace": "team-a", "creationTimestamp": at(0)},
        "status": {
            "phase": "Completed",
            "progress": "done",
            "conditions": [{"type": "Succeeded", "status": "True", "message": "<b>trained</b>"}],
            "memory": {"train": {"estimateMiB": 900, "peakMiB": 820, "limitMiB": 2048}},
            "progressDetail": {"metrics": {"testAccuracy": 0.79}},
        },
    }


def readings() -> Readings:
    gone = "uid-w1-a"  # the first attempt's worker-1: deleted, its Events remain
    events = [
        event("DGLJob", "cut", "job", "SuccessfulCreate", 12, "created pod cut-worker-0"),
        event("Pod", "cut-worker-1", gone, "Scheduled", 13,
              "Successfully assigned team-a/cut-worker-1 to node-2"),
        event("Pod", "cut-worker-1", gone, "Started", 15, path="spec.containers{dgl-graphsage}"),
        event("Pod", "cut-worker-1", gone, "Killing", 50, path="spec.containers{dgl-graphsage}"),
        event("DGLJob", "cut", "job", "DGLJobRestarting", 51, "<script>alert(1)</script> lost"),
    ]  # fmt: skip
    pods = [
        pod("worker-0", "uid-w0-b", "node-1", 60, 120),
        pod("worker-1", "uid-w1-b", "node-2", 60, 120),
        pod("launcher", "uid-l-b", "node-1", 62, 125),
    ]
    logs = [launcher_log(1, 20, 0, 2), launcher_log(2, 65, 2, 4)]
    return read(job(), pods, events, logs, now=T0 + 200)
