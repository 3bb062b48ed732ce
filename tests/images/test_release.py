"""`make release` for real: hack/release.py's folder, each artifact checked, its push.sh run
against a real registry with skopeo, and the chart archive rendered with the values push.sh
wrote: the operator and the launcher's init images come from that registry."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

from localcluster.cluster import REPO
from localcluster.helm import helm_binary
from tests.images.helpers import which


def sums_hold(folder: Path) -> list[str]:
    """The files SHA256SUMS lists whose hash differs (or that are gone)."""
    bad = []
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        path = folder / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            bad.append(name)
    return bad


def test_the_release_holds_every_artifact_and_installs_from_its_registry(
    built: dict[str, dict[str, Any]], registry: str, tmp_path: Path
) -> None:
    out = subprocess.run(
        [sys.executable, "hack/release.py", "--out", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=3600, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    (folder,) = (tmp_path / "dist").iterdir()
    version = folder.name.removeprefix("dgl-operator-")
    assert sums_hold(folder) == []
    (folder / "CHANGELOG.md").write_text("changed\n")  # the check catches a changed file
    assert sums_hold(folder) == ["CHANGELOG.md"]

    # the wheel: the client, dglctl and dglrun, of this version
    with zipfile.ZipFile(folder / f"dgl_operator-{version}-py3-none-any.whl") as wheel:
        names = wheel.namelist()
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = wheel.read(entry).decode()
    assert "dglctl = dgl_operator.cli:main" in scripts and "dglrun = launcher.cli:main" in scripts
    assert "dgl_operator/client/__init__.py" in names

    # the chart: appVersion = the images' tag, the CRD inside
    with tarfile.open(folder / f"dgl-operator-{version}.tgz") as chart:
        meta = yaml.safe_load(chart.extractfile("dgl-operator/Chart.yaml").read())  # type: ignore[union-attr]
        assert "dgl-operator/crds/qihoo.net_dgljobs.yaml" in chart.getnames()
    assert meta["version"] == meta["appVersion"] == version

    # each image archive is the build's, manifest for manifest
    for name in ("operator", "watcher-loop", "kubectl-download", "graphsage"):
        tarball = Path(built[name]["tarball"])
        with tarfile.open(folder / "images" / tarball.name) as t:
            index = json.load(t.extractfile("index.json"))  # type: ignore[arg-type]
        assert index["manifests"][0]["digest"] == built[name]["manifest_digest"], name

    # push.sh: usage without a registry; then every image to a real one, and the values file
    usage = subprocess.run([str(folder / "push.sh")], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    dest = f"{registry}/ml"
    pushed = subprocess.run(
        [str(folder / "push.sh"), dest, "--dest-tls-verify=false"],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert f"your jobs' image: {dest}/graphsage:{version}" in pushed.stdout
    skopeo = which("skopeo")
    assert skopeo is not None
    inspect = subprocess.run(
        [skopeo, "inspect", "--tls-verify=false", f"docker://{dest}/dgl-operator:{version}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["Digest"] == built["operator"]["manifest_digest"]
    (values,) = folder.glob("values-*.yaml")

    # helm renders the archive with those values: every image the operator runs or names is
    # the registry's
    rendered = subprocess.run(
        [helm_binary(), "template", "dgl-operator", str(folder / f"dgl-operator-{version}.tgz"),
         "-n", "dgl-system", "-f", str(values)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    deployment = next(
        d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "Deployment"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{dest}/dgl-operator:{version}"
    args = " ".join(container.get("args") or [])
    for image in ("watcher-loop", "kubectl-download"):
        assert f"{dest}/{image}:{version}" in args, args
    assert "dgloperator/" not in rendered.stdout.replace(f"{dest}/", "")
