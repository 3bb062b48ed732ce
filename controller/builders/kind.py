"""A kind of object a DGLJob owns and the controller watches (:class:`ChildKind`): how its
informer is filtered, what it keeps, whether the sync creates it once, and with which settings it
is in use. The registry of them is controller/children.py; a feature's kinds are its entry's
(controller/features/registry.py). A kind it only reads, owned by others, is a
:class:`WatchedKind` (a feature's ``watches``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.builders.meta import JOB_NAME_LABEL
from controller.builders.options import BuildOptions
from kubeclient import Obj, Resource


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
    # a kind of a CRD the settings need: what the operator says while it is not installed
    # (the settings that need it, what to install); "": a kind every cluster serves
    missing: str = ""

    def in_use(self, options: BuildOptions) -> bool:
        return self.enabled is None or self.enabled(options)


@dataclass(frozen=True)
class WatchedKind:
    """A kind of object the operator reads but does not own (a feature's: Kueue's
    LocalQueues): watched in the namespaces the operator watches, its lister among the sync's
    (controller/children.py :class:`Listers`). An object added or deleted for which
    ``concerns`` is true queues every DGLJob of its namespace (its updates queue nothing: only
    its being there is read)."""

    resource: Resource
    concerns: Callable[[Obj], bool]
    enabled: Callable[[BuildOptions], bool] | None = None
    transform: Callable[[Obj], Obj] | None = None
    missing: str = ""

    def in_use(self, options: BuildOptions) -> bool:
        return self.enabled is None or self.enabled(options)
