"""The kinds of object a DGLJob owns and the controller watches: one registry, one entry each.

Everything per child kind is derived from :data:`CHILDREN`: the controller's informers (one per
entry, filtered by the entry's label selector, indexed by controlling owner, keeping what the
entry's transform keeps), their event handlers, the :class:`Listers` the sync reads, and which
children the sync creates once and then leaves alone. Adding a child kind is adding an entry
here (and building it in controller/builders/), or, for a feature's, to its entry's kinds
(controller/features/registry.py). An entry may be in use only with some operator settings
(``enabled``): :func:`active` is the registry for those settings, and a kind not in use is not
watched (the PodGroup's CRD exists only where a gang scheduler is installed).

The kinds the operator reads but does not own (Kueue's LocalQueues, a feature's) are
:data:`WATCHED`: an informer and a lister each, and handlers that queue the jobs of the
namespace of an object that concerns them.

Not here: the children created blind and never watched (the transfer Secret: the operator may
create Secrets but not read them; the storage claim, which may outlive the job).
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.builders import BuildOptions
from controller.builders.kind import ChildKind, WatchedKind
from controller.features import registry
from controller.machinery.slim import slim_metadata, slim_pod
from informers.lister import Lister
from kubeclient import (
    CONFIGMAPS,
    PODS,
    ROLEBINDINGS,
    ROLES,
    SERVICEACCOUNTS,
    SERVICES,
    Resource,
)

__all__ = ["CHILDREN", "ONCE_BY_KIND", "WATCHED", "ChildKind", "Listers", "active", "watched"]


CHILDREN: tuple[ChildKind, ...] = (
    ChildKind(PODS, transform=slim_pod),
    ChildKind(SERVICES, transform=slim_metadata),
    ChildKind(CONFIGMAPS),  # its data is compared and replaced: kept whole
    ChildKind(SERVICEACCOUNTS, once=True, transform=slim_metadata),
    ChildKind(ROLES, once=True, transform=slim_metadata),
    ChildKind(ROLEBINDINGS, once=True, transform=slim_metadata),
    # each feature's (controller/features/registry.py): the PodGroup, the Workload, the
    # NetworkPolicy
    *registry.kinds(),
)


def active(options: BuildOptions) -> tuple[ChildKind, ...]:
    """The entries of :data:`CHILDREN` in use with these settings."""
    return tuple(c for c in CHILDREN if c.in_use(options))


# the kinds the operator reads but does not own: the features' (Kueue's LocalQueues)
WATCHED: tuple[WatchedKind, ...] = registry.watched()


def watched(options: BuildOptions) -> tuple[WatchedKind, ...]:
    """The entries of :data:`WATCHED` in use with these settings."""
    return tuple(w for w in WATCHED if w.in_use(options))


# the children created once and left alone, by the kind their objects carry
ONCE_BY_KIND: Mapping[str, Resource] = {c.resource.kind: c.resource for c in CHILDREN if c.once}


class Listers:
    """The DGLJob lister and one lister per entry of :data:`CHILDREN` and :data:`WATCHED` in
    use with ``options``, by resource."""

    def __init__(
        self,
        jobs: Lister,
        children: Mapping[Resource, Lister],
        options: BuildOptions | None = None,
    ) -> None:
        options = options or BuildOptions()
        kinds: list[ChildKind | WatchedKind] = [*active(options), *watched(options)]
        missing = [str(c.resource) for c in kinds if c.resource not in children]
        if missing:
            raise ValueError(f"no lister for the child resources {missing}")
        self.jobs = jobs
        self._children = dict(children)

    def __getitem__(self, res: Resource) -> Lister:
        return self._children[res]
