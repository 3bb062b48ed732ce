"""Label selectors (``k8s.io/apimachinery/pkg/labels`` syntax) and the field selectors the API
server supports for the resources the project lists: parsing (``ValueError`` on bad syntax, the
API server's 400) and matching an object.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from kubeclient import Obj
from tests.fakekube.validation import label_key_error, label_value_error


def object_labels(obj: Obj) -> dict[str, str]:
    """``metadata.labels`` of ``obj`` as strings (none: empty)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector. ``op`` is one of
    ``=``, ``!=``, ``exists``, ``!``, ``in``, ``notin``, ``>``, ``<``."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = str(labels[self.key]) if present else None
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op in (">", "<"):
            if value is None:
                return False
            try:
                have = int(value)
            except ValueError:
                return False
            want = int(self.values[0])
            return have > want if self.op == ">" else have < want
        raise AssertionError(self.op)


_TOKEN = re.compile(r"\s*(?:(!=|==|=|!|\(|\)|,|<|>)|([^\s!=(),<>]+))")


def _tokenize(selector: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(selector):
        m = _TOKEN.match(selector, pos)
        if m is None:
            if selector[pos:].strip() == "":
                break
            raise ValueError(f"unable to parse selector {selector!r} at position {pos}")
        if m.group(1) is not None:
            tokens.append(("op", m.group(1)))
        else:
            tokens.append(("id", m.group(2)))
        pos = m.end()
    return tokens


@lru_cache(maxsize=512)
def parse_label_selector(selector: str) -> tuple[Requirement, ...]:
    """Parse a Kubernetes label selector (``k8s.io/apimachinery/pkg/labels.Parse`` syntax).

    Supports ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``, ``a notin (x,y)``,
    ``a>1``, ``a<1``, joined by commas (AND). Raises :class:`ValueError` on bad syntax or an
    invalid label key/value.
    """
    toks = _tokenize(selector)
    if not toks:
        return ()
    i = 0

    def peek() -> tuple[str, str] | None:
        return toks[i] if i < len(toks) else None

    def take_id(what: str) -> str:
        nonlocal i
        t = peek()
        if t is None or t[0] != "id":
            found = "end of string" if t is None else repr(t[1])
            raise ValueError(f"unable to parse requirement: expected {what}, found {found}")
        i += 1
        return t[1]

    def take_op(op: str) -> None:
        nonlocal i
        t = peek()
        if t != ("op", op):
            found = "end of string" if t is None else repr(t[1])
            raise ValueError(f"unable to parse requirement: expected {op!r}, found {found}")
        i += 1

    reqs: list[Requirement] = []
    while True:
        t = peek()
        if t == ("op", "!"):
            i += 1
            req = Requirement(take_id("key"), "!")
        else:
            key = take_id("key")
            t = peek()
            if t is None or t == ("op", ","):
                req = Requirement(key, "exists")
            elif t[0] == "op" and t[1] in ("=", "==", "!="):
                i += 1
                nxt = peek()
                value = ""
                if nxt is not None and nxt[0] == "id":
                    value = nxt[1]
                    i += 1
                req = Requirement(key, "!=" if t[1] == "!=" else "=", (value,))
            elif t[0] == "op" and t[1] in (">", "<"):
                i += 1
                value = take_id("an integer value")
                try:
                    int(value)
                except ValueError:
                    raise ValueError(
                        f"unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                        f"must be an integer, got {value!r}"
                    ) from None
                req = Requirement(key, t[1], (value,))
            elif t in (("id", "in"), ("id", "notin")):
                i += 1
                take_op("(")
                values: list[str] = []
                while True:
                    nxt = peek()
                    if nxt is not None and nxt[0] == "id":
                        values.append(nxt[1])
                        i += 1
                        nxt = peek()
                    else:
                        values.append("")
                    if nxt == ("op", ")"):
                        i += 1
                        break
                    if nxt == ("op", ","):
                        i += 1
                        continue
                    found = "end of string" if nxt is None else repr(nxt[1])
                    raise ValueError(
                        f"unable to parse requirement: expected ',' or ')', found {found}"
                    )
                req = Requirement(key, t[1], tuple(dict.fromkeys(values)))
            else:
                raise ValueError(
                    f"unable to parse requirement: unexpected {t[1]!r} after key {key!r}"
                )
        err = label_key_error(req.key)
        if err:
            raise ValueError(f"unable to parse requirement: invalid label key {req.key!r}: {err}")
        if req.op not in (">", "<"):
            for v in req.values:
                verr = label_value_error(v)
                if verr:
                    raise ValueError(
                        f"unable to parse requirement: invalid label value {v!r}: {verr}"
                    )
        reqs.append(req)
        t = peek()
        if t is None:
            return tuple(reqs)
        take_op(",")


def match_label_selector(selector: str, labels: dict[str, str]) -> bool:
    """True if ``labels`` satisfy the Kubernetes label ``selector`` (empty matches all)."""
    return all(r.matches(labels) for r in parse_label_selector(selector))


_FIELDS: dict[str, Callable[[Obj], str]] = {
    "metadata.name": lambda o: str((o.get("metadata") or {}).get("name") or ""),
    "metadata.namespace": lambda o: str((o.get("metadata") or {}).get("namespace") or ""),
    "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
}


@lru_cache(maxsize=512)
def parse_field_selector(selector: str) -> tuple[tuple[str, bool, str], ...]:
    """Parse ``field=value``, ``field==value``, ``field!=value`` terms joined by commas.

    Returns ``(field, equal, value)`` triples. Supported fields: ``metadata.name``,
    ``metadata.namespace``, ``status.phase``; anything else raises :class:`ValueError`
    (the API server answers 400 "field label not supported").
    """
    out: list[tuple[str, bool, str]] = []
    for raw in selector.split(","):
        term = raw.strip()
        if not term:
            continue
        for op in ("!=", "==", "="):
            if op in term:
                field, value = term.split(op, 1)
                break
        else:
            raise ValueError(f"invalid field selector term {term!r}: no operator")
        field = field.strip()
        if field not in _FIELDS:
            raise ValueError(f'field label not supported: "{field}"')
        out.append((field, op != "!=", value.strip()))
    return tuple(out)


def match_field_selector(selector: str, obj: Obj) -> bool:
    return all((_FIELDS[f](obj) == v) == eq for f, eq, v in parse_field_selector(selector))
