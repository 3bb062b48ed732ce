"""``DGLJobClient``: submit, follow and collect DGLJobs from Python (a notebook, a script, a
pipeline step), through the API server as kubectl does.

    from dgl_operator.client import DGLJobClient

    jobs = DGLJobClient(namespace="team-a")            # ~/.kube/config, $KUBECONFIG or in-cluster
    jobs.create("examples/graphsage/dgljob-storage.yaml")
    for line in jobs.logs("dgl-graphsage-kept", follow=True):   # the launcher's [k/5] log
        print(line)
    job = jobs.wait("dgl-graphsage-kept", timeout=3600)  # JobFailed(reason, message) if it fails
    print(jobs.results("dgl-graphsage-kept", "./results"))  # model.pt, metrics.json, logs/

Jobs go in as a YAML path, a dict or a typed :class:`dgljob.model.DGLJob` (``new_job(...)``)
and come out typed, as the Kubeflow SDK's do: ``create``, ``get``, ``list``, ``wait``,
``suspend`` and ``resume`` return :class:`DGLJob` (the operator's own model: ``job.spec``
parsed, ``job.raw`` the API server's object, ``job["status"]`` read from it).

Configuration follows the ``kubernetes`` package's rules: ``kubeconfig`` (else ``$KUBECONFIG``,
else ``~/.kube/config``) and its ``context``, else the pod's service account in a cluster. The
namespace is the one given, else the context's, else the pod's, else ``default``.

Every refusal of the API server raises :class:`ApiRefused` with kubectl's wording; every other
error is a :class:`DGLJobError` subclass with a one-line message.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dgl_operator.client import logs as logs_mod
from dgl_operator.client import report as report_mod
from dgl_operator.client import results as results_mod
from dgl_operator.client.errors import (
    ApiRefused,
    DGLJobError,
    InvalidJob,
    JobFailed,
    JobNotFound,
    ManifestError,
    NoResults,
    WaitTimeout,
)
from dgl_operator.client.spec import manifest, typed
from dgl_operator.client.status import JobProgress, ended, failure, phase, reached
from dgl_operator.report.readings import Readings, event_time
from dgljob.model import DGLJob
from dgljob.names import API_VERSION, GROUP, KIND, PLURAL, VERSION
from kubeclient import EVENTS, ApiError, Gone, NotFound, Resource, RestClient, TransportError

DGLJOBS = Resource(GROUP, VERSION, PLURAL, KIND)
INCLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
USER_AGENT = "dglctl"

JobLike = str | Path | dict[str, Any] | DGLJob


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's context (the current one unless ``context``), else
    the pod's own in a cluster, else ``default``."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    default_path = os.path.expanduser("~/.kube/config")
    if path or os.path.exists(default_path):
        from kubernetes import config

        try:
            contexts, current = config.list_kube_config_contexts(config_file=path or default_path)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError):
            return "default"
        chosen = next((c for c in contexts if c["name"] == context), None) if context else current
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")
    if INCLUSTER_NAMESPACE.exists():
        return INCLUSTER_NAMESPACE.read_text().strip() or "default"
    return "default"


def connect(kubeconfig: str | None, context: str | None) -> RestClient:
    """The API client for a kubeconfig (or in-cluster); a one-line error naming the file."""
    from kubernetes.config.config_exception import ConfigException

    which = kubeconfig or os.environ.get("KUBECONFIG") or ""
    if not which and os.path.exists(os.path.expanduser("~/.kube/config")):
        which = "~/.kube/config"
    if kubeconfig and not os.path.exists(kubeconfig):
        raise DGLJobError(f"the kubeconfig {kubeconfig} does not exist")
    try:
        return RestClient.from_config(kubeconfig, context, pool_size=4, user_agent=USER_AGENT)
    except ConfigException as e:
        where = f"the kubeconfig {which}" if which else "no kubeconfig, and not in a cluster"
        raise DGLJobError(f"{where}: {e}") from e


class DGLJobClient:
    """DGLJobs of one namespace (each call may name another with ``namespace=``)."""

    def __init__(
        self,
        namespace: str | None = None,
        *,
        context: str | None = None,
        kubeconfig: str | None = None,
        api: RestClient | None = None,
    ) -> None:
        self.api = api or connect(kubeconfig, context)
        self._explicit_namespace = namespace is not None
        self.namespace = namespace or default_namespace(kubeconfig, context)

    # -- helpers ---------------------------------------------------------------------------

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def _call(self, fn: Callable[[], Any], name: str = "", namespace: str = "") -> Any:
        try:
            return fn()
        except NotFound as e:
            if name:
                raise JobNotFound(namespace or self.namespace, name) from e
            raise ApiRefused(e) from e
        except ApiError as e:
            raise ApiRefused(e) from e

    # -- create, get, list, delete -----------------------------------------------------------

    def create(
        self, job: JobLike, *, namespace: str | None = None, dry_run: bool = False
    ) -> DGLJob:
        """Create the job (a YAML path, a dict or a :class:`DGLJob`); its namespace is the
        manifest's, else the client's. ``dry_run``: the API server validates it (schema, the
        CRD's rules, unknown fields) and stores nothing. Returns the created object."""
        obj = manifest(job)
        meta = obj["metadata"]
        given = namespace or (self.namespace if self._explicit_namespace else None)
        if meta.get("namespace") and given and meta["namespace"] != given:
            raise ManifestError(
                f'the namespace from the provided object "{meta["namespace"]}" does not '
                f'match the namespace "{given}": pass namespace="{meta["namespace"]}" (or '
                f"-n {meta['namespace']}) to create it there"
            )
        ns = meta.get("namespace") or given or self.namespace
        meta["namespace"] = ns

        def send(dry: bool) -> dict[str, Any]:
            out: dict[str, Any] = self._call(
                lambda: self.api.create(DGLJOBS, ns, obj, field_validation="Strict", dry_run=dry)
            )
            return out

        try:
            typed(obj)
        except InvalidJob:
            # What the API server refuses reads as kubectl's error; what only the operator's
            # parser refuses (a quantity's suffix, fields that exclude each other) is named
            # before anything is stored: the operator would fail the job InvalidSpec.
            send(True)
            raise
        return typed(send(dry_run))

    def get(self, name: str, *, namespace: str | None = None) -> DGLJob:
        return typed(self._get(name, self._ns(namespace)))

    def _get(self, name: str, ns: str) -> dict[str, Any]:
        out: dict[str, Any] = self._call(lambda: self.api.get(DGLJOBS, ns, name), name, ns)
        return out

    def list(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        selector: str | None = None,
    ) -> builtins.list[DGLJob]:
        """The jobs by namespace and name, as kubectl lists them (``all_namespaces``: every
        namespace's). A stored job whose spec the parser refuses (one admitted before the
        CRD's rules; the operator has failed it InvalidSpec) is left out: :meth:`get` raises
        :class:`InvalidJob` naming its field, and :meth:`list_raw` lists it."""
        out = []
        for item in self.list_raw(
            namespace=namespace, all_namespaces=all_namespaces, selector=selector
        ):
            try:
                out.append(typed(item))
            except InvalidJob:
                continue
        return out

    def list_raw(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        selector: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """The stored objects, as the API server returns them, by namespace and name (what
        dglctl prints: every job, whether its spec parses or not)."""
        ns = None if all_namespaces else self._ns(namespace)
        out = self._call(lambda: self.api.list(DGLJOBS, ns, label_selector=selector))
        items = list(out.get("items") or [])
        for item in items:  # (a list's items carry no kind)
            item.setdefault("apiVersion", API_VERSION)
            item.setdefault("kind", KIND)
        meta = [item.get("metadata") or {} for item in items]
        order = sorted(
            range(len(items)),
            key=lambda i: (meta[i].get("namespace") or "", meta[i].get("name") or ""),
        )
        return [items[i] for i in order]

    def delete(
        self, name: str, *, namespace: str | None = None, wait: bool = False, timeout: float = 120
    ) -> None:
        """Delete the job; the garbage collector deletes its pods, Services and ConfigMap after
        it (background, kubectl's default). ``wait``: until the job is gone. A claim it made
        with ``claimPolicy: Retain`` stays."""
        ns = self._ns(namespace)
        self._call(
            lambda: self.api.delete(DGLJOBS, ns, name, propagation_policy="Background"), name, ns
        )
        deadline = time.monotonic() + timeout
        while wait:
            try:
                self.api.get(DGLJOBS, ns, name)
            except NotFound:
                return
            if time.monotonic() > deadline:
                raise WaitTimeout(name, ("deleted",), timeout, "Deleting")
            time.sleep(0.5)

    def suspend(self, name: str, *, namespace: str | None = None) -> DGLJob:
        """``runPolicy.suspend: true``: the operator deletes the job's pods and holds it
        Suspended (with spec.storage, resuming carries on from its last checkpoint)."""
        return self._set_suspend(name, namespace, True)

    def resume(self, name: str, *, namespace: str | None = None) -> DGLJob:
        return self._set_suspend(name, namespace, False)

    def _set_suspend(self, name: str, namespace: str | None, value: bool) -> DGLJob:
        ns = self._ns(namespace)
        patch = {"spec": {"runPolicy": {"suspend": value}}}
        out: dict[str, Any] = self._call(lambda: self.api.patch(DGLJOBS, ns, name, patch), name, ns)
        return typed(out)

    # -- following --------------------------------------------------------------------------

    def _watch(self, name: str, ns: str, timeout: float | None) -> Iterator[dict[str, Any]]:
        """The job now, then each change, until ``timeout`` (None: for ever). Raises
        JobNotFound when it is (or gets) deleted."""
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self._get(name, ns)
        yield job
        rv = job["metadata"].get("resourceVersion")
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            window = int(min(left, 60)) + 1 if left is not None else 60
            try:
                stream = self.api.watch(
                    DGLJOBS, ns, resource_version=rv, timeout_seconds=window,
                    field_selector=f"metadata.name={name}", allow_bookmarks=False,
                )  # fmt: skip
                try:
                    for event in stream:
                        obj = event.get("object") or {}
                        if event.get("type") == "DELETED":
                            raise JobNotFound(ns, name)
                        if event.get("type") == "ERROR":
                            raise Gone(410, "Expired", str(obj.get("message") or ""))
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        yield obj
                        if deadline is not None and time.monotonic() > deadline:
                            return
                finally:
                    stream.close()  # (also when the caller stops early: wait() returned)
            except (Gone, TransportError):
                job = self._get(name, ns)  # (relist: this one object)
                rv = job["metadata"].get("resourceVersion")
                yield job
            except ApiError as e:
                raise ApiRefused(e) from e

    def wait(
        self,
        name: str,
        *,
        until: tuple[str, ...] | str = ("Succeeded",),
        timeout: float | None = None,
        namespace: str | None = None,
    ) -> DGLJob:
        """Wait until the job is in one of ``until`` (condition types that are True, e.g.
        ``Succeeded``, ``Running``, ``Suspended``; or phases, e.g. ``Training``) and return it.
        Raises :class:`JobFailed` (the operator's reason and message) when it fails, or ends
        without reaching any of ``until``; :class:`WaitTimeout` after ``timeout`` seconds."""
        want = (until,) if isinstance(until, str) else tuple(until)
        ns = self._ns(namespace)
        last: dict[str, Any] = {}
        for job in self._watch(name, ns, timeout):
            last = job
            if reached(job, want):
                return typed(job)
            how = ended(job)
            if how == "Failed":
                reason, message = failure(job)
                raise JobFailed(name, reason, message, job)
            if how is not None:
                raise JobFailed(
                    name,
                    how,
                    f"it ended {how} (phase {phase(job)}) without reaching {' or '.join(want)}",
                    job,
                )
        raise WaitTimeout(name, want, float(timeout or 0), phase(last))

    def progress(
        self, name: str, *, namespace: str | None = None, timeout: float | None = None
    ) -> Iterator[JobProgress]:
        """The job's :class:`JobProgress` now and at each change of its phase, progress,
        ETA, metrics or restarts, until it ends (the last one has ``ended`` set) or
        ``timeout``."""
        ns = self._ns(namespace)
        seen = None
        for job in self._watch(name, ns, timeout):
            p = JobProgress.of(job)
            key = (p.phase, p.text, p.restarts, p.ended, p.eta, sorted(p.metrics.items()))
            if key != seen:
                seen = key
                yield p
            if p.ended:
                return

    def show_progress(
        self, name: str, *, namespace: str | None = None, timeout: float | None = None
    ) -> JobProgress:
        """Draw the job's progress as a bar over its epochs (tqdm's, in a notebook too, when
        tqdm is installed; else one line per change) until it ends; its last JobProgress."""
        from dgl_operator.client.bar import EpochBar

        last = JobProgress("", "")
        with EpochBar(name) as bar:
            for p in self.progress(name, namespace=namespace, timeout=timeout):
                bar.update(p)
                last = p
        return last

    def logs(
        self,
        name: str,
        *,
        follow: bool = False,
        namespace: str | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[str]:
        """The launcher's log, a line at a time. ``follow``: from its first line until the
        job ends, waiting for the launcher to start, and on through the new launcher pod a
        restart makes (a line ``--- <job>-launcher was replaced ...`` marks it)."""
        ns = self._ns(namespace)
        self._get(name, ns)  # (JobNotFound now, not at the first line)

        def job_ended() -> bool:
            return ended(self._get(name, ns)) is not None

        return iter(
            logs_mod.LauncherLog(
                self.api, ns, name, job_ended=job_ended, follow=follow, on_wait=on_wait
            )
        )

    def events(self, name: str, *, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        """The job's Events (the operator's and dglrun's), oldest first."""
        ns = self._ns(namespace)
        job = self._get(name, ns)
        selector = f"involvedObject.kind={KIND},involvedObject.name={name}"
        out = self._call(
            lambda: self.api.list(
                EVENTS, ns, field_selector=selector, limit=report_mod.EVENTS_LIMIT
            )
        )
        uid = job["metadata"].get("uid")
        items = [
            e
            for e in out.get("items") or []
            if (e.get("involvedObject") or {}).get("uid") in (uid, None, "")
        ]
        return sorted(items, key=lambda e: event_time(e) or 0.0)

    # -- results ----------------------------------------------------------------------------

    def results(
        self,
        name: str,
        dest: str | Path,
        *,
        namespace: str | None = None,
        checkpoints: bool = False,
        overwrite: bool = False,
        source: str | None = None,
        image: str | None = None,
    ) -> results_mod.Results:
        """Copy the job's results from its claim into ``dest``: model.pt, metrics.json,
        dglrun.json (the output folder's files) and ``logs/`` (with ``checkpoints``, also
        ``checkpoints/``), plus ``dglctl-source.json`` saying where they came from. ``dest``
        must not exist or be empty (``overwrite``: replace files of the same names).

        A job deleted since: ``source="<claim>:/runs/<run>"`` (what its status.results said)
        and ``image=`` (one with python3) read them all the same."""
        ns = self._ns(namespace)
        if source is not None:
            claim, _, folder = source.partition(":")
            if not claim or not folder.startswith("/"):
                raise NoResults(f"source {source!r}: expected <claim>:/<folder in the claim>")
            run = folder[: -len("/output")] if folder.endswith("/output") else folder
            src = results_mod.ResultsSource(ns, claim, run, job=name)
        else:
            src = results_mod.source_of(self._get(name, ns))
        if image:
            src.image = image
        return results_mod.copy(
            self.api, src, Path(dest), checkpoints=checkpoints, overwrite=overwrite
        )

    # -- the report ---------------------------------------------------------------------------

    def report(
        self,
        name: str,
        dest: str | Path,
        options: report_mod.ReportOptions | None = None,
        *,
        namespace: str | None = None,
        on_write: Callable[[Readings], None] | None = None,
    ) -> Readings:
        """Write one self-contained HTML page of the job to ``dest``: the timeline of every pod
        and attempt, each pod's memory against its limit and the plan, the partition's steps,
        the bytes moved, the Events (:mod:`dgl_operator.report`). :class:`ReportOptions`:
        ``watch`` rewrites it every ``interval`` seconds until the job ends; ``claim=False``
        does not read the claim's logs (a job with ``spec.storage`` keeps every attempt's
        there; without, the pods' logs are all there is). ``on_write`` hears each page's
        readings. Returns the last readings."""
        ns = self._ns(namespace)
        self._get(name, ns)  # (JobNotFound now)
        readings: Readings = self._call(
            lambda: report_mod.report(
                self.api, ns, lambda: self._get(name, ns), Path(dest),
                options or report_mod.ReportOptions(), on_write,
            ),
            name,
            ns,
        )  # fmt: skip
        return readings
