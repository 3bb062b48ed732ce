"""A local stand-in for the API server's CRD admission, for unit tests only.

It applies the schema's defaults, checks types/enums/bounds/lengths/patterns/required
fields, rejects unknown fields (as ``fieldValidation=Strict`` does) and evaluates the CEL
``x-kubernetes-validations`` rules with cel-python. The real API server checks the same CRD
in tests/e2e; this one keeps the schema and controller/api.py in step without a cluster.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import celpy
import yaml
from celpy.adapter import json_to_cel

from kubeclient import Obj

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "number": (int, float),
    "integer": (int,),
}


def load_crd(path: Path) -> Obj:
    crd = yaml.safe_load(path.read_text())
    assert isinstance(crd, dict)
    return crd


def version_schema(crd: Obj, version: str = "v1alpha1") -> Obj:
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema: Obj = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def apply_defaults(schema: Obj, value: Any) -> Any:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = apply_defaults(sub, value[key])
    elif isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def _type_ok(schema: Obj, value: Any) -> bool:
    t = schema.get("type")
    if t is None:
        return True
    if isinstance(value, bool) and t in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[t])


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Validator:
    def __init__(self, crd: Obj) -> None:
        self.schema = version_schema(crd)
        self.env = celpy.Environment()
        self._programs: dict[str, Any] = {}

    def _program(self, rule: str) -> Any:
        if rule not in self._programs:
            self._programs[rule] = self.env.program(self.env.compile(rule))
        return self._programs[rule]

    def validate(self, obj: Obj) -> list[str]:
        """Errors in the API server's style: ``<field path>: <message>``."""
        value = apply_defaults(self.schema, copy.deepcopy(obj))
        errors: list[str] = []
        self._walk(self.schema, value, "", errors, root=True)
        return errors

    def _walk(
        self, schema: Obj, value: Any, path: str, errors: list[str], root: bool = False
    ) -> None:
        if not _type_ok(schema, value):
            errors.append(f"{path}: Invalid value: must be of type {schema.get('type')}")
            return
        if "enum" in schema and value not in schema["enum"]:
            errors.append(
                f"{path}: Unsupported value: {value!r}: supported values: {schema['enum']}"
            )
        if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
            errors.append(f"{path}: Invalid value: {value}: should be >= {schema['minimum']}")
        if "maximum" in schema and isinstance(value, (int, float)) and value > schema["maximum"]:
            errors.append(f"{path}: Invalid value: {value}: should be <= {schema['maximum']}")
        if isinstance(value, str):
            if len(value) < schema.get("minLength", 0):
                errors.append(
                    f"{path}: Invalid value: should be at least {schema['minLength']} chars"
                )
            if len(value) > schema.get("maxLength", len(value)):
                errors.append(f"{path}: Too long: may not be longer than {schema['maxLength']}")
            if "pattern" in schema and not re.search(schema["pattern"], value):
                errors.append(
                    f"{path}: Invalid value: {value!r}: should match {schema['pattern']!r}"
                )
        if isinstance(value, list):
            if len(value) < schema.get("minItems", 0):
                errors.append(
                    f"{path}: Invalid value: should have at least {schema['minItems']} items"
                )
            for i, item in enumerate(value):
                self._walk(schema.get("items") or {}, item, f"{path}[{i}]", errors)
        if isinstance(value, dict):
            for req in schema.get("required") or []:
                if req not in value:
                    errors.append(f"{_join(path, req)}: Required value")
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
            for key, sub in value.items():
                if key in props:
                    if root and key == "metadata":
                        continue
                    self._walk(props[key], sub, _join(path, key), errors)
                elif isinstance(extra, dict):
                    self._walk(extra, sub, _join(path, key), errors)
                elif not preserve:
                    errors.append(f"{_join(path, key)}: unknown field")
        if errors:
            return  # like the API server: CEL runs only on values that passed the schema
        for rule in schema.get("x-kubernetes-validations") or []:
            if "oldSelf" in rule["rule"]:
                continue  # transition rules need an update
            ok = self._program(rule["rule"]).evaluate({"self": json_to_cel(value)})
            if not bool(ok):
                where = path + rule.get("fieldPath", "")
                where = where.lstrip(".")
                errors.append(f"{where or '<root>'}: Invalid value: {rule['message']}")
