"""Copying a job's results from its claim to a local folder.

A job with ``spec.storage`` keeps ``runs/<job>-<uid[:8]>/{output,logs,checkpoints}`` on its
claim (``status.results`` = ``<claim>:/<folder>/output``). A claim cannot be read from outside
the cluster, so the client starts a reader pod in the job's namespace: the job's own launcher
image (it has Python: dglrun runs in it) with the launcher's pod and container security
contexts (so the namespace's Pod Security level admits it), the claim mounted read-only, and
:data:`SERVER`, a few lines of standard-library Python that answer on one port:

* ``GET /<token>/manifest``: every file to copy, with its size and SHA-256;
* ``GET /<token>/archive``: the same files as one uncompressed tar stream, after which it
  exits;
* ``GET /ready``: "ok" (the kubelet's readiness probe; nothing of the claim).

Both are read through the API server's pod proxy (``pods/<pod>:<port>/proxy/...``: the same
credentials as every other call, no port-forward, no kubectl). The reader is kept to the one
copy that started it: ``<token>`` is random per call (anything else is a 404), it listens on
the pod's own IP only (what the proxy and the kubelet connect to), and a NetworkPolicy made
with it (:func:`reader_policy`) admits no pod at all: the API server's proxy comes from the
node, not from a pod. The token reaches the reader through a Secret made for the copy
(:func:`reader_secret`; the env :data:`TOKEN_ENV` is a ``secretKeyRef``, popped from the
environment as the server starts), never in the pod's spec, which whoever may read pods
reads; the Secret is deleted with the pod. The archive is unpacked into a
hidden folder next to the destination, every file is checked against the manifest, and only
then is the folder renamed into place: a copy that breaks leaves nothing half-written. The
reader pod and its Secret are deleted whatever happens (and the pod exits by itself after
:data:`DEADLINE`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from dgl_operator.client.errors import NoResults, ResultsCopyFailed
from dgl_operator.units import size
from kubeclient import (
    NETWORKPOLICIES,
    PODS,
    SECRETS,
    ApiError,
    NotFound,
    RestClient,
    TransportError,
)

PORT = 8470
TOKEN_ENV = "DGLCTL_READER_TOKEN"
TOKEN_KEY = "token"  # the reader's Secret's key
POD_IP_ENV = "POD_IP"
READER_LABEL = "dgl.qihoo.net/results-reader"
DEADLINE = 900  # seconds the reader pod may live (activeDeadlineSeconds)
START_TIMEOUT = 180.0
MOUNT = "/results"
SOURCE_FILE = "dglctl-source.json"
# the kubelet's waiting reasons that are no problem
STARTING = ("ContainerCreating", "PodInitializing")
# nor is a CreateContainerConfigError saying this: the Secret made just before the pod is not
# yet in the kubelet's cache, which it retries ("failed to sync secret cache: timed out
# waiting for the condition", seen once in CI); a Secret or key missing is said otherwise
CACHE_NOT_SYNCED = "failed to sync "
PARTS = ("output", "logs")  # the run folder's parts copied (output's files go to the top)

SERVER = r"""
import hashlib, hmac, http.server, json, os, sys, tarfile, threading
root, port, parts = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
token = os.environ.pop("DGLCTL_READER_TOKEN")
deadline = threading.Timer(float(sys.argv[4]), lambda: os._exit(3))
deadline.daemon = True
deadline.start()
def files():
    out = []
    for part in parts:
        base = os.path.join(root, part)
        for d, dirs, names in os.walk(base):
            dirs.sort()
            for n in sorted(names):
                path = os.path.join(d, n)
                rel = os.path.relpath(path, base)
                out.append((path, rel if part == "output" else part + "/" + rel))
    return out
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.path == "/ready":
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok"); return
        given, _, what = self.path.lstrip("/").partition("/")
        if not hmac.compare_digest(given.encode(), token.encode()):
            self.send_error(404); return
        if what == "manifest":
            listing = []
            for path, name in files():
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                size = os.path.getsize(path)
                listing.append({"name": name, "size": size, "sha256": h.hexdigest()})
            body = json.dumps({"root": root, "files": listing}).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body); return
        if what == "archive":
            self.send_response(200); self.send_header("Content-Type", "application/x-tar")
            self.end_headers()
            with tarfile.open(fileobj=self.wfile, mode="w|") as tar:
                for path, name in files():
                    tar.add(path, arcname=name, recursive=False)
            self.wfile.flush()
            threading.Thread(target=self.server.shutdown).start(); return
        self.send_error(404)
if not os.path.isdir(os.path.join(root, parts[0])):
    print(f"no folder {os.path.join(root, parts[0])} on the claim", file=sys.stderr); sys.exit(4)
http.server.HTTPServer((os.environ.get("POD_IP", "127.0.0.1"), port), H).serve_forever()
"""


@dataclass
class ResultsSource:
    """Where a job's results are: the claim, and the run folder in it (``/runs/<run>``)."""

    namespace: str
    claim: str
    run: str
    job: str = ""
    uid: str = ""
    image: str = ""
    pod_spec: dict[str, Any] = field(default_factory=dict)  # securityContext, pull secrets
    # the launcher container's own securityContext (a namespace's Pod Security level)
    container_context: dict[str, Any] = field(default_factory=dict)


@dataclass
class Results:
    """What :func:`copy` copied: ``files`` (names in ``dest``) and their ``bytes``."""

    dest: Path
    source: ResultsSource
    files: list[str]
    bytes: int

    def __str__(self) -> str:
        of = f" (job {self.source.job})" if self.source.job else ""
        return (
            f"copied {len(self.files)} files ({size(self.bytes)}) from claim "
            f"{self.source.claim}, folder {self.source.run}{of}, to {self.dest}"
        )


def source_of(job: dict[str, Any]) -> ResultsSource:
    """The results' place for a job; :class:`NoResults` says why there is none."""
    meta, spec, st = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    name, ns = meta["name"], meta.get("namespace", "default")
    if not spec.get("storage"):
        raise NoResults(
            f"dgljob {name} has no spec.storage, so its results did not outlive its pods (the "
            f"model and metrics were written in the launcher pod). Give the job a claim "
            f"(spec.storage.claimName or claimTemplate; docs/user-guide.md, section 9) and run "
            f"it again, or read them with `kubectl cp {ns}/{name}-launcher:<path> .` while the "
            f"launcher pod exists"
        )
    where = str(st.get("results") or "")
    if ":" not in where:
        raise NoResults(
            f"dgljob {name} has no results yet (status.results is empty, phase "
            f"{st.get('phase') or 'Pending'}): its claim is made or found when its pods start; "
            f"wait for the job first"
        )
    claim, folder = where.split(":", 1)
    run = str(PurePosixPath(folder).parent) if PurePosixPath(folder).name == "output" else folder
    tmpl = ((spec.get("dglReplicaSpecs") or {}).get("Launcher") or {}).get("template") or {}
    pod_spec = tmpl.get("spec") or {}
    keep = {k: pod_spec[k] for k in ("securityContext", "imagePullSecrets") if k in pod_spec}
    main = (pod_spec.get("containers") or [{}])[0]
    image = str(main.get("image") or "")
    context = main.get("securityContext") or {}
    return ResultsSource(ns, claim, run, name, str(meta.get("uid") or ""), image, keep, context)


def _reader_meta(src: ResultsSource, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": src.namespace,
        "labels": {
            "app.kubernetes.io/created-by": "dglctl",
            "dgl.qihoo.net/results-of": src.job or src.claim,
            READER_LABEL: name,
        },
    }
    if src.uid:
        meta["ownerReferences"] = [
            {"apiVersion": "qihoo.net/v1alpha1", "kind": "DGLJob", "name": src.job, "uid": src.uid}
        ]
    return meta


def reader_policy(src: ResultsSource, name: str) -> dict[str, Any]:
    """The reader pod's NetworkPolicy: ingress from no pod, of any namespace (the API server's
    proxy and the kubelet's probe come from the node, which NetworkPolicy implementations
    admit)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _reader_meta(src, name),
        "spec": {
            "podSelector": {"matchLabels": {READER_LABEL: name}},
            "policyTypes": ["Ingress"],
            "ingress": [],
        },
    }


def reader_secret(src: ResultsSource, name: str, token: str) -> dict[str, Any]:
    """The Secret that carries the copy's token to the reader pod of the same name."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _reader_meta(src, name),
        "type": "Opaque",
        "immutable": True,
        "stringData": {TOKEN_KEY: token},
    }


def reader_pod(src: ResultsSource, name: str, parts: tuple[str, ...]) -> dict[str, Any]:
    """The reader pod; its token is its Secret's (:func:`reader_secret`, of the same name)."""
    root = f"{MOUNT}{src.run}" if src.run.startswith("/") else f"{MOUNT}/{src.run}"
    container = {
        "name": "reader",
        "image": src.image,
        "command": ["python3", "-c", SERVER, root, str(PORT), ",".join(parts), str(DEADLINE)],
        "env": [
            {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": name, "key": TOKEN_KEY}}},
            {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "ports": [{"containerPort": PORT, "name": "results"}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": PORT}, "periodSeconds": 1},
        "volumeMounts": [{"name": "results", "mountPath": MOUNT, "readOnly": True}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        **({"securityContext": src.container_context} if src.container_context else {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _reader_meta(src, name),
        "spec": {
            **src.pod_spec,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": DEADLINE,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
            "volumes": [
                {
                    "name": "results",
                    "persistentVolumeClaim": {"claimName": src.claim, "readOnly": True},
                }
            ],
        },
    }


def _why_not_started(pod: dict[str, Any]) -> str | None:
    """The reason a reader pod will not serve, once one is known."""
    st = pod.get("status") or {}
    if st.get("phase") in ("Failed", "Succeeded"):
        for cs in st.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term:
                said = f": {term['message']}" if term.get("message") else ""
                return f"it exited {term.get('exitCode')} ({term.get('reason') or 'Error'}){said}"
        return f"it ended {st.get('phase')}: {st.get('reason') or ''} {st.get('message') or ''}"
    reason, message = _waiting(pod)
    if reason and reason not in STARTING and not message.startswith(CACHE_NOT_SYNCED):
        return f"{reason}: {message}".strip()  # (ErrImagePull, ...: a problem)
    return None


def _waiting(pod: dict[str, Any]) -> tuple[str, str]:
    """Why the kubelet says the reader's container waits: (reason, message); ("", "")."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"]), str(waiting.get("message") or "")
    return "", ""


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _scheduling(pod: dict[str, Any]) -> str:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"{c.get('reason')}: {c.get('message')}"
    return ""


def _check_dest(dest: Path, overwrite: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise ResultsCopyFailed(f"{dest} exists and is not a folder: choose another destination")
    if dest.is_dir() and any(dest.iterdir()) and not overwrite:
        raise ResultsCopyFailed(
            f"{dest} is not empty: choose another folder, or overwrite its files "
            f"(overwrite=True, dglctl results --overwrite)"
        )


def _unpack(stream: Any, into: Path, manifest: list[dict[str, Any]]) -> int:
    """Unpack the archive into ``into`` (names checked: relative, no ``..``, regular files
    only) and check every file of the manifest arrived with its size and SHA-256."""
    want = {f["name"]: f for f in manifest}
    got: dict[str, tuple[int, str]] = {}
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            name = member.name
            parts = PurePosixPath(name).parts
            if not member.isfile() or name.startswith("/") or ".." in parts or name not in want:
                raise ResultsCopyFailed(f"the reader pod sent an unexpected entry {name!r}")
            target = into.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            body = tar.extractfile(member)
            assert body is not None
            h, size = hashlib.sha256(), 0
            with open(target, "wb") as out:
                while block := body.read(1 << 20):
                    h.update(block)
                    size += len(block)
                    out.write(block)
            got[name] = (size, h.hexdigest())
    total = 0
    for name, f in want.items():
        if got.get(name) != (f["size"], f["sha256"]):
            raise ResultsCopyFailed(
                f"{name} did not arrive whole (expected {f['size']} bytes, sha256 "
                f"{f['sha256'][:12]}...; got {got.get(name)}): nothing was copied, try again"
            )
        total += int(f["size"])
    return total


def copy(
    api: RestClient,
    src: ResultsSource,
    dest: Path,
    *,
    checkpoints: bool = False,
    overwrite: bool = False,
    start_timeout: float = START_TIMEOUT,
) -> Results:
    """Copy ``src``'s output (to ``dest``), its logs (``dest/logs``) and with ``checkpoints``
    its checkpoints (``dest/checkpoints``) through a reader pod."""
    dest = Path(dest).expanduser().resolve()
    _check_dest(dest, overwrite)
    if not src.image:
        raise NoResults("no image to read the claim with: pass image= (dglctl results --image)")
    parts = PARTS + (("checkpoints",) if checkpoints else ())
    name = f"{(src.job or src.claim)[:45]}-results-{secrets.token_hex(2)}"
    token = secrets.token_urlsafe(24)
    try:
        api.create(NETWORKPOLICIES, src.namespace, reader_policy(src, name))
    except ApiError as e:
        raise ResultsCopyFailed(
            f"cannot create the NetworkPolicy {src.namespace}/{name} that keeps other pods "
            f"from the reader pod ({e}): copying results needs create and delete on "
            f"networkpolicies (networking.k8s.io) and pods in {src.namespace}"
        ) from e
    staging = dest.parent / f".{dest.name}.partial-{secrets.token_hex(3)}"
    try:
        try:
            api.create(SECRETS, src.namespace, reader_secret(src, name, token))
        except ApiError as e:
            raise ResultsCopyFailed(
                f"cannot create the Secret {src.namespace}/{name} that carries the reader pod's "
                f"token ({e}): copying results needs create and delete on secrets in "
                f"{src.namespace}"
            ) from e
        api.create(PODS, src.namespace, reader_pod(src, name, parts))
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                pod = api.get(PODS, src.namespace, name)
            except NotFound as e:
                raise ResultsCopyFailed(f"the reader pod {src.namespace}/{name} was deleted") from e
            if _ready(pod):
                break
            why = _why_not_started(pod)
            if why:
                raise ResultsCopyFailed(
                    f"the reader pod {src.namespace}/{name} (image {src.image}, claim "
                    f"{src.claim}) cannot serve the results: {why}"
                )
            if time.monotonic() > deadline:
                reason, message = _waiting(pod)
                state = f"{reason}: {message}".strip() if reason else f"phase {_phase(pod)}"
                raise ResultsCopyFailed(
                    f"the reader pod {src.namespace}/{name} did not start within "
                    f"{start_timeout:.0f}s ({_scheduling(pod) or state})"
                )
            time.sleep(0.5)
        target = f"{name}:{PORT}"
        try:
            with api.stream(PODS, src.namespace, target, f"proxy/{token}/manifest") as s:
                manifest = json.loads(s.read())["files"]
            staging.mkdir(parents=True)
            archive = f"proxy/{token}/archive"
            with api.stream(PODS, src.namespace, target, archive, read_timeout=120) as s:
                total = _unpack(s, staging, manifest)
        except (ApiError, TransportError, tarfile.TarError, ValueError, KeyError) as e:
            raise ResultsCopyFailed(
                f"copying from the reader pod {src.namespace}/{name} failed: {e}"
            ) from e
        files = [f["name"] for f in manifest]
        (staging / SOURCE_FILE).write_text(
            json.dumps(
                {
                    "job": src.job, "namespace": src.namespace, "uid": src.uid,
                    "claim": src.claim, "folder": src.run, "files": manifest,
                    "copied": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                indent=1,
            )
        )  # fmt: skip
        _place(staging, dest)
        return Results(dest, src, files, total)
    finally:
        with contextlib.suppress(ApiError, TransportError):
            api.delete(PODS, src.namespace, name, grace_period_seconds=0)
        with contextlib.suppress(ApiError, TransportError):
            api.delete(SECRETS, src.namespace, name)
        with contextlib.suppress(ApiError, TransportError):
            api.delete(NETWORKPOLICIES, src.namespace, name)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _place(staging: Path, dest: Path) -> None:
    """Move the checked files into ``dest``: a rename when it does not exist, else file by
    file (an existing file of the same name is replaced: ``overwrite``)."""
    if not dest.exists():
        os.rename(staging, dest)
        return
    for path in sorted(staging.rglob("*")):
        if path.is_file():
            target = dest / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
