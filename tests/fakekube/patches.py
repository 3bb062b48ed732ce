"""Patches on JSON documents: RFC 7386 merge patch and RFC 6902 JSON patch (both return a new
document and leave their inputs alone)."""

from __future__ import annotations

import copy
import re
from typing import Any


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new document (inputs are not modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = json_merge_patch(result.get(k), v)
    return result


class PatchError(ValueError):
    """A JSON patch that is well formed but cannot be applied (missing path, failed test)."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"JSON pointer must be a string, got {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return size
    if not re.fullmatch(r"0|[1-9][0-9]*", token):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > size or (idx == size and not allow_end):
        raise PatchError(f"array index {idx} out of bounds")
    return idx


def _get(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"path {path!r} does not exist")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(t, len(cur), allow_end=False)]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return cur


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise PatchError(f"path {path!r} does not exist")
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), allow_end=False))
    raise PatchError(f"path {path!r} does not exist")


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test); returns a new document.

    Raises :class:`TypeError` for a malformed patch and :class:`PatchError` when an operation
    cannot be applied.
    """
    if not isinstance(operations, list):
        raise TypeError("a JSON patch must be a list of operations")
    out = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise TypeError(f"malformed JSON patch operation: {op!r}")
        kind = op["op"]
        path = op["path"]
        tokens = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise TypeError(f"JSON patch operation {kind!r} needs a value")
        if kind in ("move", "copy") and "from" not in op:
            raise TypeError(f"JSON patch operation {kind!r} needs 'from'")
        if kind == "add":
            out = _add(out, tokens, copy.deepcopy(op["value"]), path)
        elif kind == "remove":
            _remove(out, tokens, path)
        elif kind == "replace":
            _get(out, tokens, path)  # must exist
            if tokens:
                _remove(out, tokens, path)
            out = _add(out, tokens, copy.deepcopy(op["value"]), path)
        elif kind == "test":
            if not _json_equal(_get(out, tokens, path), op["value"]):
                raise PatchError(f"testing value {path} failed: test failed")
        elif kind == "move":
            src = _pointer(op["from"])
            if tokens[: len(src)] == src and tokens != src:
                raise PatchError("cannot move a value into one of its children")
            value = _remove(out, src, op["from"])
            out = _add(out, tokens, value, path)
        elif kind == "copy":
            value = copy.deepcopy(_get(out, _pointer(op["from"]), op["from"]))
            out = _add(out, tokens, value, path)
        else:
            raise TypeError(f"unknown JSON patch operation {kind!r}")
    return out
