"""invalid spec? -> Failed/InvalidSpec (once: the generation is judged, no retry loop).

The spec is parsed here; every later step reads the parsed job (:attr:`Context.job`).
"""

from __future__ import annotations

from controller.api import SpecError, parse_job
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.status import conditions


def parse(ctx: Context, act: Actions) -> Next:
    try:
        job = parse_job(ctx.raw)
    except SpecError as e:
        act.fail(ctx, conditions.REASON_INVALID_SPEC, f"invalid spec: {e}")
        return Next.DONE
    return ctx.go_on_with(job)
