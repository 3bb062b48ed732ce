"""The subset of apimachinery validation a controller can trip on: names, label keys and values,
ownerReferences, a body's apiVersion and kind.

The ``*_error`` functions return the API server's message for an invalid value, or None;
:func:`check_type` and :func:`validate_meta` raise the API server's 400/422.
"""

from __future__ import annotations

import re

from kubeclient import Obj, Resource
from tests.fakekube.status import bad_request, invalid

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def label_key_error(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    bad_prefix = not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)
    if slash and bad_prefix:
        return f"prefix part of {key!r} must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            f"name part of {key!r} must consist of alphanumeric characters, '-', '_' or '.', "
            "start and end with an alphanumeric character and be at most 63 characters"
        )
    return None


def label_value_error(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _QUALIFIED_NAME.fullmatch(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return None


def name_error(res: Resource, name: str) -> str | None:
    if res.group == "" and res.plural == "services":
        if len(name) > 63 or not _DNS1035_LABEL.fullmatch(name):
            return (
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character"
            )
        return None
    if res.group == "" and res.plural == "namespaces":
        if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
            return (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character"
            )
        return None
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return None


def check_type(res: Resource, obj: Obj) -> None:
    """400 when the body names another apiVersion or kind than the URL's resource."""
    api_version = obj.get("apiVersion")
    if api_version and api_version != res.api_version:
        bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({res.api_version})"
        )
    kind = obj.get("kind")
    if kind and kind != res.kind:
        bad_request(f"the kind in the data ({kind}) does not match the expected kind ({res.kind})")


def validate_meta(res: Resource, name: str, meta: Obj) -> None:
    """400/422 for bad labels and ownerReferences (at most one controller), as the API server."""
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        bad_request("metadata.labels must be an object")
    for k, v in labels.items():
        err = label_key_error(str(k))
        if err:
            invalid(
                res,
                name,
                "metadata.labels",
                f'Invalid value: "{k}": {err}',
                "FieldValueInvalid",
            )
        if not isinstance(v, str):
            bad_request(f"metadata.labels[{k}] must be a string, got {v!r}")
        verr = label_value_error(v)
        if verr:
            invalid(
                res,
                name,
                "metadata.labels",
                f'Invalid value: "{v}": {verr}',
                "FieldValueInvalid",
            )
    refs = meta.get("ownerReferences") or []
    controllers = 0
    for i, ref in enumerate(refs):
        for field in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref, dict) or not ref.get(field):
                invalid(
                    res,
                    name,
                    f"metadata.ownerReferences[{i}].{field}",
                    "Required value",
                    "FieldValueRequired",
                )
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        invalid(
            res,
            name,
            "metadata.ownerReferences",
            "Invalid value: only one reference can have Controller set to true",
            "FieldValueInvalid",
        )
