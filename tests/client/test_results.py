"""Copying results: the reader pod's server (run here, for real, on loopback) and the client's
unpacking and checks; what a job without results is told (no server)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dgl_operator.client import NoResults, ResultsCopyFailed
from dgl_operator.client import results as r
from kubeclient import ApiError
from localcluster.ports import free_port


def run_folder(root: Path) -> Path:
    run = root / "runs" / "j-1a2b3c4d"
    (run / "output").mkdir(parents=True)
    (run / "logs" / "attempt-0").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "output" / "model.pt").write_bytes(bytes(range(256)) * 4000)
    (run / "output" / "metrics.json").write_text('{"test_accuracy": 0.9}')
    (run / "logs" / "attempt-0" / "launcher.log").write_text("[1/5] partition\n")
    (run / "checkpoints" / "epoch-1.pt").write_bytes(b"ck")
    return run


def test_the_reader_server_serves_a_manifest_and_an_archive_that_unpack_checked(
    tmp_path: Path,
) -> None:
    run = run_folder(tmp_path / "claim")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", r.SERVER, str(run), str(port), "output,logs", "60"],
        env={r.TOKEN_ENV: "s3cret", r.POD_IP_ENV: "127.0.0.1"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/ready", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        # without this call's token nothing of the claim is served
        for path in ("/manifest", "/archive", "/wrong/manifest", "/s3cre/archive", "/s3cret"):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(f"{base}{path}", timeout=5)
        base += "/s3cret"
        listing = json.loads(urllib.request.urlopen(f"{base}/manifest", timeout=5).read())["files"]
        names = [f["name"] for f in listing]
        assert names == ["metrics.json", "model.pt", "logs/attempt-0/launcher.log"]
        model = next(f for f in listing if f["name"] == "model.pt")
        assert model["size"] == 1_024_000
        assert (
            model["sha256"]
            == hashlib.sha256((run / "output" / "model.pt").read_bytes()).hexdigest()
        )
        into = tmp_path / "got"
        into.mkdir()
        with urllib.request.urlopen(f"{base}/archive", timeout=5) as archive:
            total = r._unpack(archive, into, listing)
        assert total == sum(f["size"] for f in listing)
        assert (into / "model.pt").read_bytes() == (run / "output" / "model.pt").read_bytes()
        assert (into / "logs" / "attempt-0" / "launcher.log").read_text() == "[1/5] partition\n"
        assert server.wait(10) == 0  # (it exits once the archive is sent)
    finally:
        server.kill()


def tar_of(files: dict[str, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def entry(name: str, data: bytes) -> dict[str, Any]:
    return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_a_file_that_differs_or_is_missing_or_escapes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ResultsCopyFailed, match=r"model\.pt did not arrive whole"):
        r._unpack(tar_of({"model.pt": b"abc"}), tmp_path, [entry("model.pt", b"abd")])
    with pytest.raises(ResultsCopyFailed, match=r"metrics\.json did not arrive whole"):
        r._unpack(tar_of({}), tmp_path, [entry("metrics.json", b"{}")])
    with pytest.raises(ResultsCopyFailed, match=r"unexpected entry '\.\./evil'"):
        r._unpack(tar_of({"../evil": b"x"}), tmp_path, [entry("../evil", b"x")])
    assert not (tmp_path.parent / "evil").exists()


def job(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "metadata": {"name": "j", "namespace": "a", "uid": "u-1"},
        "spec": {"dglReplicaSpecs": {"Launcher": {"template": {"spec": {
            "securityContext": {"fsGroup": 2000}, "nodeSelector": {"x": "y"},
            "containers": [{"name": "m", "image": "img:1",
                            "securityContext": {"allowPrivilegeEscalation": False}}],
        }}}}},
        "status": {"phase": "Training"},
    }  # fmt: skip
    base["spec"].update(kw.pop("spec", {}))
    base["status"].update(kw.pop("status", {}))
    return base


def test_what_a_job_without_results_is_told() -> None:
    with pytest.raises(NoResults, match=r"dgljob j has no spec\.storage.*kubectl cp a/j-launcher"):
        r.source_of(job())
    with pytest.raises(
        NoResults, match=r"dgljob j has no results yet \(status.results is empty, phase Training\)"
    ):
        r.source_of(job(spec={"storage": {"claimName": "c"}}))


def test_the_reader_pod_mounts_the_claim_read_only_and_is_owned_by_the_job() -> None:
    src = r.source_of(
        job(spec={"storage": {"claimName": "c"}}, status={"results": "c:/team/runs/j-1/output"})
    )
    assert (src.claim, src.run, src.image) == ("c", "/team/runs/j-1", "img:1")
    pod = r.reader_pod(src, "j-results-ab12", ("output", "logs"))
    spec = pod["spec"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    # the token: its Secret's, of the same name (never a value in the pod's spec)
    assert env[r.TOKEN_ENV] == {
        "name": r.TOKEN_ENV,
        "valueFrom": {"secretKeyRef": {"name": "j-results-ab12", "key": r.TOKEN_KEY}},
    }
    secret = r.reader_secret(src, "j-results-ab12", "t0k")
    assert secret["stringData"] == {r.TOKEN_KEY: "t0k"} and secret["immutable"] is True
    assert secret["metadata"]["ownerReferences"] == pod["metadata"]["ownerReferences"]
    assert secret["metadata"]["name"] == pod["metadata"]["name"]
    assert env[r.POD_IP_ENV]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # its NetworkPolicy selects it alone and admits no pod
    policy = r.reader_policy(src, "j-results-ab12")
    assert pod["metadata"]["labels"][r.READER_LABEL] == "j-results-ab12"
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {r.READER_LABEL: "j-results-ab12"}},
        "policyTypes": ["Ingress"],
        "ingress": [],
    }
    assert policy["metadata"]["ownerReferences"] == pod["metadata"]["ownerReferences"]
    assert spec["volumes"] == [
        {"name": "results", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}}
    ]
    main = spec["containers"][0]
    assert main["volumeMounts"][0]["readOnly"] is True
    assert main["securityContext"] == {"allowPrivilegeEscalation": False}  # (the launcher's)
    assert main["command"][3:] == [
        "/results/team/runs/j-1",
        str(r.PORT),
        "output,logs",
        str(r.DEADLINE),
    ]
    assert spec["securityContext"] == {"fsGroup": 2000} and "nodeSelector" not in spec
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"


def test_a_destination_with_files_is_not_touched(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ResultsCopyFailed, match="is not empty: choose another folder"):
        r._check_dest(tmp_path, overwrite=False)
    r._check_dest(tmp_path, overwrite=True)
    r._check_dest(tmp_path / "new", overwrite=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultsCopyFailed, match="exists and is not a folder"):
        r._check_dest(tmp_path / "file", overwrite=False)


class RecordingApi:
    """The calls :func:`results.copy` makes, in order; the reader pod never starts (by
    default its image cannot be pulled), so the copy fails after it made everything."""

    def __init__(self, reason: str = "ErrImagePull", message: str = "no such image") -> None:
        self.calls: list[tuple[str, str, str, Any]] = []
        self.waiting = {"reason": reason, "message": message}
        self.gets = 0

    def create(self, res: Any, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", res.kind, obj["metadata"]["name"], obj))
        return obj

    def get(self, res: Any, namespace: str, name: str) -> dict[str, Any]:
        self.gets += 1
        return {"status": {"containerStatuses": [{"state": {"waiting": self.waiting}}]}}

    def delete(self, res: Any, namespace: str, name: str, **kw: Any) -> None:
        self.calls.append(("delete", res.kind, name, None))


def test_the_copys_token_reaches_the_reader_by_its_secret_deleted_with_the_pod(
    tmp_path: Path,
) -> None:
    """Attack: whoever may get pods reads the reader's spec. The token is in the Secret made
    for the copy (created before the pod, deleted with it, even when the copy fails), never
    in the pod: the same search finds it in the Secret (the check can fail)."""
    src = r.source_of(
        job(spec={"storage": {"claimName": "c"}}, status={"results": "c:/team/runs/j-1/output"})
    )
    api = RecordingApi()
    with pytest.raises(ResultsCopyFailed, match="ErrImagePull"):
        r.copy(api, src, tmp_path / "dest")  # type: ignore[arg-type]
    made = [(verb, kind) for verb, kind, _, _ in api.calls]
    assert made == [
        ("create", "NetworkPolicy"),
        ("create", "Secret"),
        ("create", "Pod"),
        ("delete", "Pod"),
        ("delete", "Secret"),
        ("delete", "NetworkPolicy"),
    ]
    assert len({name for _, _, name, _ in api.calls}) == 1  # one name for the three
    secret = next(obj for verb, kind, _, obj in api.calls if kind == "Secret" and obj)
    pod = next(obj for verb, kind, _, obj in api.calls if kind == "Pod" and obj)
    token = secret["stringData"][r.TOKEN_KEY]
    assert len(token) >= 32
    assert token in json.dumps(secret)  # the twin: the search finds the token where it is
    assert token not in json.dumps(pod)
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_the_kubelet_not_yet_holding_the_readers_secret_is_waited_out_a_missing_key_is_not(
    tmp_path: Path,
) -> None:
    """The Secret is made just before the pod: the kubelet may say CreateContainerConfigError
    ("failed to sync secret cache", seen once in CI) until its cache has it, and retries. That
    is waited for (to the start timeout, then named); a key or Secret missing fails at once."""
    src = r.source_of(
        job(spec={"storage": {"claimName": "c"}}, status={"results": "c:/team/runs/j-1/output"})
    )
    syncing = RecordingApi(
        "CreateContainerConfigError", "failed to sync secret cache: timed out waiting for the "
        "condition",
    )  # fmt: skip
    with pytest.raises(ResultsCopyFailed) as info:
        r.copy(syncing, src, tmp_path / "a", start_timeout=1.2)  # type: ignore[arg-type]
    assert "did not start within 1s (CreateContainerConfigError: failed to sync secret" in str(
        info.value
    )
    assert syncing.gets >= 2  # (asked again: waited)
    missing = RecordingApi("CreateContainerConfigError", "couldn't find key token in Secret")
    with pytest.raises(ResultsCopyFailed, match="cannot serve the results: CreateContainerConfig"):
        r.copy(missing, src, tmp_path / "b", start_timeout=60)  # type: ignore[arg-type]
    assert missing.gets == 1  # (at once)


def test_a_copy_that_may_not_make_the_secret_says_so_and_makes_no_pod(tmp_path: Path) -> None:
    src = r.source_of(
        job(spec={"storage": {"claimName": "c"}}, status={"results": "c:/team/runs/j-1/output"})
    )

    class NoSecrets(RecordingApi):
        def create(self, res: Any, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
            if res.kind == "Secret":
                raise ApiError(403, "Forbidden", "secrets is forbidden")
            return super().create(res, namespace, obj)

    api = NoSecrets()
    with pytest.raises(ResultsCopyFailed, match="needs create and delete on secrets in a"):
        r.copy(api, src, tmp_path / "dest")  # type: ignore[arg-type]
    assert [(v, k) for v, k, _, _ in api.calls if v == "create"] == [("create", "NetworkPolicy")]
    assert ("delete", "NetworkPolicy") in [(v, k) for v, k, _, _ in api.calls]
