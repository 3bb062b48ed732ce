"""Failures the way the API server answers them: a ``Status`` body, raised as the exception
:func:`kubeclient.error_from_status` maps its HTTP status to (what ``RestClient`` raises too).

Each helper raises (``NoReturn``); the messages, reasons and ``details`` follow the API server's.
"""

from __future__ import annotations

from typing import Any, NoReturn

from kubeclient import Obj, Resource, error_from_status


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Obj:
    """A ``Status`` object as the API server sends it for a failure."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def fail(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> NoReturn:
    raise error_from_status(code, status_body(code, reason, message, details))


def status_details(res: Resource, name: str | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    d["kind"] = res.plural
    d.update(extra)
    return d


def not_found(res: Resource, name: str) -> NoReturn:
    fail(404, "NotFound", f'{res} "{name}" not found', status_details(res, name))


def no_such_path() -> NoReturn:
    fail(404, "NotFound", "the server could not find the requested resource")


def bad_request(message: str) -> NoReturn:
    fail(400, "BadRequest", message)


def conflict(res: Resource, name: str, why: str) -> NoReturn:
    fail(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {res} "{name}": {why}',
        status_details(res, name),
    )


def invalid(res: Resource, name: str, field: str, message: str, cause: str) -> NoReturn:
    full = f"{field}: {message}"
    fail(
        422,
        "Invalid",
        f'{res.kind} "{name}" is invalid: {full}',
        status_details(res, name, causes=[{"reason": cause, "message": message, "field": field}]),
    )


def too_large_rv(requested: int, current: int) -> NoReturn:
    fail(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )
