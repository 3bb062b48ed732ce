"""The kinds of object a DGLJob owns and the controller watches: one registry, one entry each.

Everything per child kind is derived from :data:`CHILDREN`: the controller's informers (one per
entry, filtered by the entry's label selector, indexed by controlling owner, keeping what the
entry's transform keeps), their event handlers, the :class:`Listers` the sync reads, and which
children the sync creates once and then leaves alone. Adding a child kind is adding an entry
here (and building it in controller/builders/, or in its feature's module,
controller/features/). An entry may be in use only with some operator settings (``enabled``):
:func:`active` is the registry for those settings, and a kind not in use is not watched (the
PodGroup's CRD exists only where a gang scheduler is installed).

Not here: the children created blind and never watched (the transfer Secret: the operator may
create Secrets but not read them; the storage claim, which may outlive the job).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.builders import JOB_NAME_LABEL, BuildOptions
from controller.machinery.slim import slim_metadata, slim_pod
from informers.lister import Lister
from kubeclient import (
    CONFIGMAPS,
    NETWORKPOLICIES,
    PODGROUPS,
    PODS,
    ROLEBINDINGS,
    ROLES,
    SERVICEACCOUNTS,
    SERVICES,
    WORKLOADS,
    Obj,
    Resource,
)


@dataclass(frozen=True)
class ChildKind:
    resource: Resource
    # created once and left alone: never compared with what is wanted, never updated
    once: bool = False
    # the informer watches only the objects this selector matches (every child carries the
    # job-name label; other objects of the kind are none of the operator's business)
    label_selector: str = JOB_NAME_LABEL
    # in use only with the settings this accepts (None: always)
    enabled: Callable[[BuildOptions], bool] | None = None
    # what the informer keeps of each object (controller/machinery/slim.py; None: all of it)
    transform: Callable[[Obj], Obj] | None = None

    def in_use(self, options: BuildOptions) -> bool:
        return self.enabled is None or self.enabled(options)


def _gang(options: BuildOptions) -> bool:
    return options.gang


def _kueue(options: BuildOptions) -> bool:
    return options.kueue


def _network_policy(options: BuildOptions) -> bool:
    return options.network_policy


CHILDREN: tuple[ChildKind, ...] = (
    ChildKind(PODGROUPS, once=True, enabled=_gang, transform=slim_metadata),
    # a queued job's Workload: created once (its podSets are immutable); its status is read
    # (Kueue's admission) and written (PodsReady, Finished, a reservation cleared) whole
    ChildKind(WORKLOADS, once=True, enabled=_kueue),
    ChildKind(PODS, transform=slim_pod),
    ChildKind(SERVICES, transform=slim_metadata),
    ChildKind(CONFIGMAPS),  # its data is compared and replaced: kept whole
    ChildKind(SERVICEACCOUNTS, once=True, transform=slim_metadata),
    ChildKind(ROLES, once=True, transform=slim_metadata),
    ChildKind(ROLEBINDINGS, once=True, transform=slim_metadata),
    # the job's pods' NetworkPolicy (controller/features/network.py)
    ChildKind(NETWORKPOLICIES, once=True, enabled=_network_policy, transform=slim_metadata),
)


def active(options: BuildOptions) -> tuple[ChildKind, ...]:
    """The entries of :data:`CHILDREN` in use with these settings."""
    return tuple(c for c in CHILDREN if c.in_use(options))


# the children created once and left alone, by the kind their objects carry
ONCE_BY_KIND: Mapping[str, Resource] = {c.resource.kind: c.resource for c in CHILDREN if c.once}


class Listers:
    """The DGLJob lister and one lister per entry of :data:`CHILDREN` in use with
    ``options``, by resource."""

    def __init__(
        self,
        jobs: Lister,
        children: Mapping[Resource, Lister],
        options: BuildOptions | None = None,
    ) -> None:
        kinds = active(options or BuildOptions())
        missing = [str(c.resource) for c in kinds if c.resource not in children]
        if missing:
            raise ValueError(f"no lister for the child resources {missing}")
        self.jobs = jobs
        self._children = dict(children)

    def __getitem__(self, res: Resource) -> Lister:
        return self._children[res]
