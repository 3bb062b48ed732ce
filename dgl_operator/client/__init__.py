"""Submit, follow and collect DGLJobs from Python: :class:`DGLJobClient` (its docstring shows a
whole round); the typed job, the operator's own model (:class:`DGLJob`, built with
:func:`new_job` from :class:`MainContainer`, :class:`StorageSpec`, :class:`RunPolicy`, ...:
:mod:`dgljob`); the readings (:class:`JobProgress`) and the errors (:class:`DGLJobError` and
its subclasses)."""

from dgl_operator.client.client import DGLJOBS, DGLJobClient, default_namespace
from dgl_operator.client.errors import (
    ApiRefused,
    DGLJobError,
    InvalidJob,
    JobFailed,
    JobNotFound,
    ManifestError,
    NoResults,
    ResultsCopyFailed,
    WaitTimeout,
)
from dgl_operator.client.report import ReportOptions
from dgl_operator.client.results import Results
from dgl_operator.client.spec import manifest
from dgl_operator.client.status import JobProgress
from dgljob.build import MainContainer, new_job
from dgljob.model import (
    ChunkedGraphSpec,
    DGLJob,
    ElasticPolicy,
    OutOfCoreSpec,
    RunPolicy,
    SchedulingPolicy,
    StorageSpec,
)
from dgljob.parse import SpecError

__all__ = [
    "DGLJOBS",
    "ApiRefused",
    "ChunkedGraphSpec",
    "DGLJob",
    "DGLJobClient",
    "DGLJobError",
    "ElasticPolicy",
    "InvalidJob",
    "JobFailed",
    "JobNotFound",
    "JobProgress",
    "MainContainer",
    "ManifestError",
    "NoResults",
    "OutOfCoreSpec",
    "ReportOptions",
    "Results",
    "ResultsCopyFailed",
    "RunPolicy",
    "SchedulingPolicy",
    "SpecError",
    "StorageSpec",
    "WaitTimeout",
    "default_namespace",
    "manifest",
    "new_job",
]
