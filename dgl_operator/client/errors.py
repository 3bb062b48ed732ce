"""What the client raises. Every error is a :class:`DGLJobError` whose message is one line a
person can act on: the job, the field or the file it is about, and what to do."""

from __future__ import annotations

from typing import Any


class DGLJobError(Exception):
    """The base of every error this client raises."""


class ManifestError(DGLJobError):
    """A manifest that cannot be a DGLJob: a file missing or not YAML, another kind, no name."""


class ApiRefused(DGLJobError):
    """The API server said no (validation, not found, forbidden, ...); the message reads as
    kubectl's: ``Error from server (<reason>): <message>``. ``error`` is kubeclient's."""

    def __init__(self, error: Any) -> None:
        self.error = error
        reason = getattr(error, "reason", "") or type(error).__name__
        message = getattr(error, "message", "") or str(error)
        super().__init__(f"Error from server ({reason}): {message}")


class InvalidJob(DGLJobError):
    """A stored DGLJob whose spec the operator's parser refuses (it was admitted before the
    CRD's rules, or breaks one only the parser states): the operator fails it InvalidSpec.
    ``raw`` is the object; ``error`` the :class:`dgljob.parse.SpecError` naming the field."""

    def __init__(self, raw: dict[str, Any], error: Exception) -> None:
        self.raw, self.error = raw, error
        name = (raw.get("metadata") or {}).get("name") or "?"
        super().__init__(f"dgljob {name} has an invalid spec: {error}")


class JobNotFound(DGLJobError):
    def __init__(self, namespace: str, name: str) -> None:
        self.namespace, self.name = namespace, name
        super().__init__(f'dgljob "{name}" not found in namespace "{namespace}"')


class JobFailed(DGLJobError):
    """The job ended Failed (or finished without reaching what was waited for): its reason
    and message are the operator's (status.conditions)."""

    def __init__(self, name: str, reason: str, message: str, job: dict[str, Any]) -> None:
        self.name, self.reason, self.message, self.job = name, reason, message, job
        super().__init__(f"dgljob {name} failed: {reason}: {message}")


class WaitTimeout(DGLJobError):
    def __init__(self, name: str, until: tuple[str, ...], timeout: float, phase: str) -> None:
        self.name, self.until, self.timeout, self.phase = name, until, timeout, phase
        super().__init__(
            f"dgljob {name} did not reach {' or '.join(until)} within {timeout:g}s "
            f"(phase {phase or 'unknown'})"
        )


class NoResults(DGLJobError):
    """The job keeps no results to copy (no spec.storage), or not yet."""


class ResultsCopyFailed(DGLJobError):
    """The copy from the claim failed: the reader pod did not start, or a file did not arrive
    whole. Nothing is left half-written in the destination."""
