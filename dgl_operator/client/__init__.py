"""Submit, follow and collect DGLJobs from Python: :class:`DGLJobClient` (its docstring shows a
whole round), the typed spec (:class:`DGLJob`, :class:`Container`, :class:`Storage`,
:class:`RunPolicy`), the readings (:class:`Progress`) and the errors (:class:`DGLJobError`
and its subclasses)."""

from dgl_operator.client.client import DGLJOBS, DGLJobClient, default_namespace
from dgl_operator.client.errors import (
    ApiRefused,
    DGLJobError,
    JobFailed,
    JobNotFound,
    ManifestError,
    NoResults,
    ResultsCopyFailed,
    WaitTimeout,
)
from dgl_operator.client.results import Results
from dgl_operator.client.spec import Container, DGLJob, RunPolicy, Storage, manifest
from dgl_operator.client.status import Progress

__all__ = [
    "DGLJOBS",
    "ApiRefused",
    "Container",
    "DGLJob",
    "DGLJobClient",
    "DGLJobError",
    "JobFailed",
    "JobNotFound",
    "ManifestError",
    "NoResults",
    "Progress",
    "Results",
    "ResultsCopyFailed",
    "RunPolicy",
    "Storage",
    "WaitTimeout",
    "default_namespace",
    "manifest",
]
