"""The API client: the project's only HTTP code.

Objects are raw JSON dicts (:data:`Obj`, defined once in :mod:`kubeclient.types`);
:class:`KubeClient` (:mod:`kubeclient.client`) is the interface callers type against and
:class:`RestClient` (:mod:`kubeclient.rest`) its HTTP implementation (the credentials it sends:
:mod:`kubeclient.auth`); :class:`Resource` and the resource constants
(:mod:`kubeclient.resources`) name what is addressed; every refusal is an
:class:`ApiError` subclass chosen by HTTP status, every unreachable server a
:class:`TransportError` (:mod:`kubeclient.errors`). Nothing here caches or knows the operator.
"""

from kubeclient.client import KubeClient, WatchStream
from kubeclient.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    error_from_status,
    is_expired,
    is_too_large_resource_version,
)
from kubeclient.resources import (
    CONFIGMAPS,
    EVENTS,
    LEASES,
    LOCALQUEUES,
    NAMESPACES,
    NETWORKPOLICIES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PODGROUPS,
    PODS,
    PRIORITYCLASSES,
    RESOURCEFLAVORS,
    ROLEBINDINGS,
    ROLES,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICES,
    WORKLOADS,
    Resource,
)
from kubeclient.rest import PATCH_TYPES, ByteStream, RequestObserver, RestClient
from kubeclient.types import Obj

__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "LEASES",
    "LOCALQUEUES",
    "NAMESPACES",
    "NETWORKPOLICIES",
    "NODES",
    "PATCH_TYPES",
    "PERSISTENTVOLUMECLAIMS",
    "PODGROUPS",
    "PODS",
    "PRIORITYCLASSES",
    "RESOURCEFLAVORS",
    "ROLEBINDINGS",
    "ROLES",
    "SECRETS",
    "SERVICEACCOUNTS",
    "SERVICES",
    "WORKLOADS",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "ByteStream",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeClient",
    "KubeError",
    "NotFound",
    "Obj",
    "RequestObserver",
    "Resource",
    "RestClient",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WatchStream",
    "error_from_status",
    "is_expired",
    "is_too_large_resource_version",
]
