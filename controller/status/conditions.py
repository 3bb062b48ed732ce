"""The DGLJob's conditions, their reasons and the phases, and the timestamps they carry:
how a condition is read and set."""

from __future__ import annotations

from controller.machinery.objects import now_rfc3339 as now_rfc3339
from controller.machinery.objects import parse_time as parse_time
from kubeclient import Obj

# Condition types (Kubeflow's) and reasons.
CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
PODS_READY = "PodsReady"  # False: a pod of the job waits, the reason says why
# dglrun's report (controller/lifecycle/reported.py): False while a field of it is refused
REPORTED = "Reported"

REASON_CREATED = "DGLJobCreated"
REASON_RUNNING = "DGLJobRunning"
REASON_RESTARTING = "DGLJobRestarting"
REASON_SUCCEEDED = "DGLJobSucceeded"
REASON_SUSPENDED = "DGLJobSuspended"
REASON_RESUMED = "DGLJobResumed"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_DEADLINE = "DeadlineExceeded"
REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
REASON_OOM_KILLED = "OOMKilled"  # a container of the job was killed for memory
# (or a process in one: dglrun's termination message starts with OOM_PREFIX and says which)
# dglrun's memory plan found a step that will not fit (its message: MEMORY_PLAN_PREFIX)
REASON_MEMORY_PLAN = "MemoryPlanExceeded"
# a process of the job refused a file it was to load (a checkpoint or a model that could run
# code): dglrun's termination message starts with REFUSED_PREFIX and quotes it, naming the file
REASON_FILE_REFUSED = "FileRefused"
# PodsReady: every pod of the attempt has started; or still starting after a wait was resolved
REASON_PODS_READY = "PodsReady"
REASON_PODS_STARTING = "PodsStarting"
# a pod waits: the scheduler's reason, or the kubelet's for a waiting container
REASON_UNSCHEDULABLE = "Unschedulable"
# schedulingPolicy.scheduleTimeoutSeconds passed with a pod not started and no reason known
REASON_SCHEDULE_TIMEOUT = "ScheduleTimeoutExceeded"
# a node holding a pod of the job is NotReady, unreachable or gone
REASON_NODE_LOST = "NodeLost"

# Phases: the original operator's words, plus Restarting and Suspended.
PENDING = "Pending"
PARTITIONING = "Partitioning"
PARTITIONED = "Partitioned"
TRAINING = "Training"
COMPLETED = "Completed"
PHASE_FAILED = "Failed"
PHASE_RESTARTING = "Restarting"
PHASE_SUSPENDED = "Suspended"


def get_condition(status: Obj, ctype: str) -> Obj | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(status: Obj, ctype: str) -> bool:
    c = get_condition(status, ctype)
    return bool(c and c.get("status") == "True")


def set_condition(
    status: Obj, ctype: str, true: bool, reason: str, message: str, now: float
) -> bool:
    """Set one condition in place; lastTransitionTime changes only when status flips.
    Returns True when anything changed."""
    value = "True" if true else "False"
    conditions = [dict(c) for c in status.get("conditions") or []]
    stamp = now_rfc3339(now)
    for c in conditions:
        if c.get("type") != ctype:
            continue
        if c.get("status") == value and c.get("reason") == reason and c.get("message") == message:
            return False
        if c.get("status") != value:
            c["lastTransitionTime"] = stamp
        c.update(status=value, reason=reason, message=message, lastUpdateTime=stamp)
        status["conditions"] = conditions
        return True
    if not true and ctype not in (SUSPENDED, PODS_READY, REPORTED):
        return False  # an absent condition already means False; do not clutter the list
    conditions.append(
        {
            "type": ctype,
            "status": value,
            "reason": reason,
            "message": message,
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    status["conditions"] = conditions
    return True


def finished(status: Obj) -> bool:
    return is_true(status, SUCCEEDED) or is_true(status, FAILED)
