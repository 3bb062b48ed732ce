"""API errors mapped to exception classes by HTTP status (and Status reason where it matters).

Everything the API server says "no" to becomes an :class:`ApiError` subclass; transport
failures (refused connection, reset, read timeout) become :class:`TransportError`, so callers
can tell "the server refused" from "the server could not be reached".
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """Base class of every error raised by the REST boundary."""


class TransportError(KubeError):
    """The request did not get an HTTP answer (connection refused/reset, read timeout, TLS)."""


class ApiError(KubeError):
    """The API server answered with a non-2xx status."""

    status: int = 0

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}
        self.retry_after = retry_after
        super().__init__(f"{status} {reason}: {message}".strip())

    @property
    def causes(self) -> list[dict[str, Any]]:
        details = self.body.get("details") or {}
        causes = details.get("causes") or []
        return [c for c in causes if isinstance(c, dict)]


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409: an optimistic-concurrency conflict (stale resourceVersion / failed precondition)."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create hit an existing name."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old (watch expired)."""


class Invalid(ApiError):
    """422: the object failed validation (OpenAPI schema, CEL rules, field validation)."""


class TooManyRequests(ApiError):
    pass


class ServerError(ApiError):
    """5xx answers, including 504 'Too large resource version' on a watch."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_from_status(status: int, body: Any, retry_after: float | None = None) -> ApiError:
    """Build the exception for an HTTP status and its (possibly JSON) body."""
    obj: dict[str, Any] = {}
    if isinstance(body, dict):
        obj = body
    elif isinstance(body, (bytes, str)) and body:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = {"message": body.decode(errors="replace") if isinstance(body, bytes) else body}
        if isinstance(parsed, dict):
            obj = parsed
    reason = str(obj.get("reason") or "")
    message = str(obj.get("message") or "")
    if status == 409 and reason == "AlreadyExists":
        cls: type[ApiError] = AlreadyExists
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason, message, obj, retry_after)


def is_expired(err: BaseException) -> bool:
    """True for 'resourceVersion too old': relist, do not just re-watch."""
    if isinstance(err, Gone):
        return True
    return isinstance(err, ApiError) and err.reason == "Expired"


def is_too_large_resource_version(err: BaseException) -> bool:
    """True for 'Too large resource version' (the server has not seen that RV yet)."""
    if not isinstance(err, ApiError):
        return False
    if any(c.get("reason") == "ResourceVersionTooLarge" for c in err.causes):
        return True
    return "too large resource version" in err.message.lower()
