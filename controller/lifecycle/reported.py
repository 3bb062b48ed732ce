"""dglrun's report -> the status (the first step: a finished job takes its last report too).

    reported        -> the running attempt's report (``<job>-report``, podcontract/report.py),
                       checked field by field, copied into the status; the Events it asks
                       for, recorded once; a field refused: condition Reported False and a
                       Warning quoting why

No pod of a job may write its DGLJob: this is how what only dglrun knows (its progress, the
partitions and checkpoint it used, its memory and delivery figures) reaches the status. What
the operator decides on (phase, conditions, queue, times, counts, members, secret names) is
never read from the report. A report the job does not own (by controller UID) is ignored.
"""

from __future__ import annotations

from controller.features import registry
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery import objects as ob
from controller.machinery.events import WARNING
from controller.status.conditions import REPORTED, get_condition
from dgljob.names import run_name
from kubeclient import CONFIGMAPS
from podcontract import report

REASON_REFUSED = "ReportRefused"  # (the condition's and the Warning's)
REASON_ACCEPTED = "ReportAccepted"
MAX_SAID = 1024  # characters of the refusal said in the condition and the Event


def copy_report(ctx: Context, act: Actions) -> Next:
    raw = ctx.raw
    ns, name, uid = ob.namespace(raw), ob.name(raw), ob.uid(raw)
    cm = act.listers[CONFIGMAPS].get(ns, report.report_name(name))
    if cm is None or ob.owner_uid(cm) != uid:
        return Next.GO_ON
    attempt = registry.attempt(ctx.status)
    reading = report.read(cm.get("data"), attempt, run_name(name, uid))
    ctx.status.update(reading.status)
    memo = act.memos[ob.key(raw)]
    seen = dict(memo.report_events)
    for event in reading.events:
        at = (attempt, event.reporter)
        if event.seq > seen.get(at, 0):
            ctx.plan.announce(event.type, event.reason, event.message)
            seen[at] = event.seq
    if seen != memo.report_events:
        ctx.plan.on_written.append(lambda: setattr(memo, "report_events", seen))
    _say_refusal(ctx, act, reading.problems, report.report_name(name))
    return Next.GO_ON


def _say_refusal(ctx: Context, act: Actions, problems: list[str], where: str) -> None:
    """Reported False quoting the refusal (a Warning once per message); True again once the
    report passes."""
    if not problems:
        if (get_condition(ctx.status, REPORTED) or {}).get("status") == "False":
            ctx.set_condition(REPORTED, True, REASON_ACCEPTED, f"dglrun's report ({where}) passes")
        return
    said = "; ".join(problems)
    message = f"dglrun's report (ConfigMap {where}) refused in part: {said}"[:MAX_SAID]
    ctx.set_condition(REPORTED, False, REASON_REFUSED, message)
    memo = act.memos[ob.key(ctx.raw)]
    if memo.report_refusal_told != message:
        ctx.plan.announce(WARNING, REASON_REFUSED, message)
        ctx.plan.on_written.append(lambda: setattr(memo, "report_refusal_told", message))
