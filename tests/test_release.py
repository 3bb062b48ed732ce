"""hack/release.py without building anything: the version is said once (setup.cfg), and a
chart that says another is refused naming the file and the key."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", REPO / "hack" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("release", module)
    spec.loader.exec_module(module)
    return module


release = load_release()


def test_the_repository_says_one_version() -> None:
    """setup.cfg's version, which the chart's version and appVersion repeat."""
    assert re.fullmatch(r"\d+\.\d+\.\d+", release.version(REPO))


def copy_of(tmp_path: Path, app_version: str) -> Path:
    (tmp_path / "charts" / "dgl-operator").mkdir(parents=True)
    shutil.copyfile(REPO / "setup.cfg", tmp_path / "setup.cfg")
    chart = (REPO / "charts" / "dgl-operator" / "Chart.yaml").read_text()
    lines = [
        f'appVersion: "{app_version}"' if ln.startswith("appVersion:") else ln
        for ln in chart.splitlines()
    ]
    (tmp_path / "charts" / "dgl-operator" / "Chart.yaml").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_chart_of_another_version_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    said = release.version(REPO)
    assert release.version(copy_of(tmp_path / "same", said)) == said
    with pytest.raises(release.ReleaseError) as e:
        release.version(copy_of(tmp_path / "other", "9.9.9"))
    assert str(e.value) == (
        f"version: charts/dgl-operator/Chart.yaml appVersion is 9.9.9, setup.cfg says {said}: "
        "say the same in both"
    )


def test_push_sh_names_every_image_once_and_writes_the_values_of_the_chart() -> None:
    images = [release.Image(n, r, Path(f"/x/{r}.tar")) for n, r in (
        ("operator", "dgl-operator"), ("watcher-loop", "watcher-loop"),
        ("kubectl-download", "kubectl-download"), ("graphsage", "graphsage"),
    )]  # fmt: skip
    script = release.push_script("1.2.3", images)
    assert "for name in dgl-operator watcher-loop kubectl-download graphsage; do" in script
    assert 'image: {repository: "$dest/dgl-operator", tag: "1.2.3"}' in script
    assert 'watcherLoop: {image: {repository: "$dest/watcher-loop", tag: "1.2.3"}}' in script
    assert "kubectlDownload: {image: {repository" in script
    assert "graphsage:" not in script.split("<<EOF", 1)[1].split("EOF", 1)[0]  # (a job's image)
