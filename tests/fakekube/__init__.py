"""An in-memory fake of the Kubernetes API for unit tests.

The idea is client-go's fake clientset + object tracker: :class:`FakeKube` implements the
:class:`kubeclient.KubeClient` protocol on top of dicts, with the API server behaviours a
controller depends on. One concept per module:

* ``server``: :class:`FakeKube` itself: one global, etcd-like resourceVersion counter (every
  write bumps it); optimistic concurrency (409 Conflict on a stale
  ``metadata.resourceVersion``); the status subresource (main-resource writes keep the stored
  status and bump ``metadata.generation`` on spec changes, ``/status`` writes change only
  ``status``); finalizers and ``deletionTimestamp``; UID preconditions on delete; fault
  injection, an action log and a garbage-collector emulation;
* ``watch``: watches with a bounded event history, "too old resource version" (410 Expired)
  after compaction, selector transitions (an object that stops matching is sent as DELETED,
  one that starts matching as ADDED), bookmarks, server timeouts, clean ends and broken
  connections;
* ``selectors``: list and watch label and field selectors;
* ``patches``: JSON merge patch (RFC 7386) and JSON patch (RFC 6902);
* ``validation``: names, labels, ownerReferences, apiVersion/kind of a body;
* ``status``: errors raised the way :class:`kubeclient.RestClient` raises them, through
  :func:`kubeclient.error_from_status` with a Kubernetes ``Status`` body.
"""

from tests.fakekube.patches import PatchError, json_merge_patch, json_patch
from tests.fakekube.selectors import (
    Requirement,
    match_field_selector,
    match_label_selector,
    parse_field_selector,
    parse_label_selector,
)
from tests.fakekube.server import VERBS, WRITE_VERBS, Action, FakeKube
from tests.fakekube.status import status_body
from tests.fakekube.watch import FakeWatch

__all__ = [
    "VERBS",
    "WRITE_VERBS",
    "Action",
    "FakeKube",
    "FakeWatch",
    "PatchError",
    "Requirement",
    "json_merge_patch",
    "json_patch",
    "match_field_selector",
    "match_label_selector",
    "parse_field_selector",
    "parse_label_selector",
    "status_body",
]
