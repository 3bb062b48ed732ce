"""invalid spec? -> Failed/InvalidSpec (once: the generation is judged, no retry loop).

The spec is parsed here; every later step reads the parsed job (:attr:`Context.job`). Beside
the parser's rules, the one that needs the operator's settings: no template may wear the
operator's own service account.
"""

from __future__ import annotations

from controller.api import LAUNCHER, WORKER, DGLJob, SpecError, parse_job
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.status import conditions
from dgljob.names import ACCOUNT_FIELDS


def parse(ctx: Context, act: Actions) -> Next:
    try:
        job = parse_job(ctx.raw)
        refuse_the_operators_account(job, act.options.operator_service_account)
    except SpecError as e:
        act.fail(ctx, conditions.REASON_INVALID_SPEC, f"invalid spec: {e}")
        return Next.DONE
    return ctx.go_on_with(job)


def refuse_the_operators_account(job: DGLJob, account: str) -> None:
    """A template of ``job`` naming the operator's own service account (``account``,
    NAMESPACE/NAME: --operator-service-account; "": unknown) is refused, naming the field.
    Only a job in the operator's namespace can name it; its rights are the operator's, in
    every namespace. (The accounts the operator makes for jobs are the parser's rule.)"""
    namespace, _, name = account.partition("/")
    if not name or job.namespace != namespace:
        return
    for rtype, replica in ((LAUNCHER, job.spec.launcher), (WORKER, job.spec.worker)):
        spec = (replica.template.get("spec") or {}) if replica is not None else {}
        for key in ACCOUNT_FIELDS:
            if spec.get(key) == name:
                raise SpecError(
                    f"spec.dglReplicaSpecs.{rtype}.template.spec.{key}",
                    f'"{name}" is the operator\'s own service account (its rights in every '
                    "namespace): a template may not name it; name an account of your own",
                )
