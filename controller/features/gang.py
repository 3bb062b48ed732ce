"""Gang scheduling (``--gang-scheduling``): the scheduler that places a job's pods all or none.
With scheduler-plugins' Coscheduling each job gets a PodGroup, made before any pod, and every
pod of the job is labelled with the group's name and goes to that scheduler."""

from __future__ import annotations

from controller.api import DGLJob
from controller.builders.kind import ChildKind
from controller.builders.meta import _meta
from controller.builders.options import BuildOptions
from controller.machinery.slim import slim_metadata
from kubeclient import PODGROUPS, Obj

NAME = "gang"

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group(job: DGLJob) -> Obj:
    """``<job>``: scheduler-plugins' PodGroup. Coscheduling places none of the job's pods
    before ``minMember`` of them can all be placed. (It has no queue or priority field:
    ``schedulingPolicy.queue`` means nothing to it; ``priorityClass`` is on the pods.)"""
    spec: Obj = {"minMember": job.spec.min_available}
    timeout = job.spec.run_policy.scheduling_policy.schedule_timeout_seconds
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": PODGROUPS.kind,
        "metadata": _meta(job, job.name),
        "spec": spec,
    }


def _join_gang(opts: BuildOptions, job: DGLJob, pod: Obj) -> Obj:
    """The pod belongs to the job's PodGroup and goes to the gang scheduler (unless its
    template names a scheduler: the user's choice stands)."""
    pod["metadata"]["labels"][POD_GROUP_LABEL] = job.name
    pod["spec"].setdefault("schedulerName", opts.gang_scheduler_name)
    return pod


def _in_use(opts: BuildOptions, job: DGLJob) -> bool:
    return opts.gang and job.spec.gang


def _gang(options: BuildOptions) -> bool:
    return options.gang


class Gang:
    """The feature's entry (controller/features/registry.py): the PodGroup, made first and
    watched (its CRD exists only where a gang scheduler is installed); every pod joins it."""

    name = NAME
    before_rbac = True
    kinds = (
        ChildKind(
            PODGROUPS,
            once=True,
            enabled=_gang,
            transform=slim_metadata,
            missing="--gang-scheduling scheduler-plugins: the PodGroup CRD "
            "(podgroups.scheduling.x-k8s.io) is not installed: install scheduler-plugins "
            "(docs/operations.md, Gang scheduling)",
        ),
    )

    def children(self, job: DGLJob, opts: BuildOptions, token: str) -> list[Obj]:
        return [pod_group(job)] if _in_use(opts, job) else []

    def mutate_pod(self, job: DGLJob, opts: BuildOptions, pod: Obj) -> Obj:
        return _join_gang(opts, job, pod) if _in_use(opts, job) else pod


GANG = Gang()
