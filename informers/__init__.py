"""Raw list/watch loops feeding shared informers with indexed, read-only caches of JSON dicts."""

from informers.factory import SharedInformerFactory
from informers.lister import Lister
from informers.listwatch import ListerWatcher, ListWatch
from informers.reflector import Reflector
from informers.shared import EventHandler, SharedInformer, wait_for_cache_sync
from informers.store import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    ThreadSafeStore,
    controller_ref,
    controller_uid_index,
    meta_namespace_key,
    split_key,
)

__all__ = [
    "CONTROLLER_UID_INDEX",
    "NAMESPACE_INDEX",
    "DeletedFinalStateUnknown",
    "EventHandler",
    "ListWatch",
    "Lister",
    "ListerWatcher",
    "Reflector",
    "SharedInformer",
    "SharedInformerFactory",
    "ThreadSafeStore",
    "controller_ref",
    "controller_uid_index",
    "meta_namespace_key",
    "split_key",
    "wait_for_cache_sync",
]
