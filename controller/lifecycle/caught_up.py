"""our writes not in the caches yet? -> decide nothing (no status write): the next sync,
once the informers have seen what this process created and deleted, decides on them."""

from __future__ import annotations

import structlog

from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next

log = structlog.get_logger("controller.lifecycle")


def wait_for_caches(ctx: Context, act: Actions) -> Next:
    if act.expectations.satisfied(ctx.job.key):
        return Next.GO_ON
    log.debug("waiting for the cache to see our writes", job=ctx.job.key)
    return Next.NOTHING
