#!/usr/bin/env python3
"""``make release``: every artifact a platform team installs from, versioned once.

    python hack/release.py [--out dist] [--python PY]

The version is setup.cfg's; the chart's ``version`` and ``appVersion`` must say the same (the
images' tag is the chart's appVersion, so the chart pulls the images of its own release). It
writes ``<out>/dgl-operator-<version>/``:

- ``dgl_operator-<version>-py3-none-any.whl``: the client, ``dglctl`` and ``dglrun``;
- ``dgl-operator-<version>.tgz``: the chart (``helm package``);
- ``images/<name>-<version>.tar``: each image a user's cluster runs, as an OCI image-layout
  archive (hack/build_images.py's, built or reused from its cache);
- ``push.sh REGISTRY[/FOLDER] [skopeo copy options]``: copies the images there with skopeo
  and writes ``values-<registry>.yaml``, the chart values that point the operator and the
  launcher's init containers at them (and says the jobs' image to use);
- ``CHANGELOG.md``, ``LICENSE``, ``SHA256SUMS`` (of every file above).

Every failure is one line naming the step: ``release: <step>: <why>``, exit status 1.
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "dgl-operator"
# the images of a user's cluster, by the name hack/build_images.py gives them (not pause: the
# local cluster's sandbox image), and the chart values that name the first three
IMAGES = ("operator", "watcher-loop", "kubectl-download", "graphsage")
VALUES = {"operator": "image", "watcher-loop": "watcherLoop.image",
          "kubectl-download": "kubectlDownload.image"}  # fmt: skip
DOCUMENTS = ("CHANGELOG.md", "LICENSE")
SHEBANG = "#!/bin/sh"  # prereqs: in the image of the machine that runs push.sh, not this one


class ReleaseError(Exception):
    """A step failed: ``str()`` is ``<step>: <why>``."""


@dataclass(frozen=True)
class Image:
    name: str  # hack/build_images.py's: operator, graphsage, ...
    repository: str  # the name its tarball carries, without the registry: dgl-operator
    tarball: Path


def version(repo: Path = REPO) -> str:
    """setup.cfg's version, checked against the chart's version and appVersion."""
    cfg = configparser.ConfigParser()
    cfg.read(repo / "setup.cfg")
    found = cfg.get("metadata", "version", fallback="")
    if not found:
        raise ReleaseError("version: setup.cfg has no [metadata] version")
    chart = (repo / "charts" / "dgl-operator" / "Chart.yaml").read_text()
    for key in ("version", "appVersion"):
        m = re.search(rf'^{key}:\s*"?([^"\s]+)"?\s*$', chart, re.M)
        said = m.group(1) if m else None
        if said != found:
            raise ReleaseError(
                f"version: charts/dgl-operator/Chart.yaml {key} is {said}, setup.cfg says "
                f"{found}: say the same in both"
            )
    return found


def run(step: str, argv: Sequence[str], timeout: float = 1800) -> str:
    try:
        out = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ReleaseError(f"{step}: {e}") from None
    if out.returncode != 0:
        last = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise ReleaseError(f"{step}: `{' '.join(argv[:4])} ...` exited {out.returncode}: "
                           + " | ".join(last))  # fmt: skip
    return out.stdout


def built_images(tag: str) -> list[Image]:
    """hack/build_images.py's tarballs of :data:`IMAGES` (built, or reused from its cache)."""
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        summary = Path(tmp) / "summary.json"
        only = ",".join(IMAGES)
        run("images", [sys.executable, "hack/build_images.py", "--only", only, "--tag", tag,
                       "--json", str(summary)])  # fmt: skip
        items = json.loads(summary.read_text())
    found = {}
    for item in items:
        reference = item["reference"]  # docker.io/dgloperator/dgl-operator:0.2.0
        repository = reference.rsplit("/", 1)[1].rsplit(":", 1)[0]
        found[item["image"]] = Image(item["image"], repository, Path(item["tarball"]))
    missing = [n for n in IMAGES if n not in found]
    if missing:
        raise ReleaseError(f"images: hack/build_images.py made no {', '.join(missing)}")
    return [found[n] for n in IMAGES]


def push_script(tag: str, images: list[Image]) -> str:
    """push.sh: skopeo copies of the archives, then the values file for the registry."""
    copies = " ".join(i.repository for i in images)
    yaml_lines = []
    for i in images:
        if i.name not in VALUES:
            continue
        path = VALUES[i.name].split(".")
        inner = f'{{repository: "$dest/{i.repository}", tag: "{tag}"}}'
        yaml_lines.append(
            f"{path[0]}: {inner}" if len(path) == 1 else f"{path[0]}: {{{path[1]}: {inner}}}"
        )
    graphsage = next(i.repository for i in images if i.name == "graphsage")
    return f"""{SHEBANG}
# push.sh REGISTRY[/FOLDER] [skopeo copy options, e.g. --dest-tls-verify=false]
#
# Copies this release's images to REGISTRY[/FOLDER] with skopeo (log in first with
# `skopeo login REGISTRY` if it wants credentials): {copies}.
# Then writes values-<registry>.yaml beside this script: the chart values that point the
# operator and the launcher's init containers at them.
set -eu
if [ $# -lt 1 ] || [ -z "$1" ]; then
\techo "usage: $0 REGISTRY[/FOLDER] [skopeo copy options]" >&2
\texit 2
fi
dest="${{1%/}}"
shift
here="$(cd "$(dirname "$0")" && pwd)"
command -v skopeo >/dev/null || {{ echo "push.sh: skopeo is not installed" >&2; exit 1; }}
for name in {copies}; do
\tskopeo copy "$@" "oci-archive:$here/images/$name-{tag}.tar" "docker://$dest/$name:{tag}"
done
values="$here/values-$(printf '%s' "$dest" | tr -c 'A-Za-z0-9.-' '_').yaml"
cat > "$values" <<EOF
{chr(10).join(yaml_lines)}
EOF
echo "pushed {len(images)} images to $dest; the chart values: $values"
echo "install: helm install dgl-operator $here/dgl-operator-{tag}.tgz" \\
	"-n dgl-system --create-namespace -f $values"
echo "your jobs' image: $dest/{graphsage}:{tag}"
"""


def tracked(to: Path) -> None:
    """Copy the repository's tracked files (``git ls-files``) to ``to``."""
    names = run("wheel", ["git", "-C", str(REPO), "ls-files", "-z"]).split("\0")
    for name in filter(None, names):
        source, target = REPO / name, to / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def release(out: Path, python: str, helm: str) -> Path:
    tag = version()
    folder = out / f"dgl-operator-{tag}"
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "images").mkdir(parents=True)
    wheel = [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    with tempfile.TemporaryDirectory(prefix="release-src-") as src:
        # (from the tracked files, in a folder of its own: setuptools writes build/ where it
        # builds, and a release holds what the repository holds, not what lies beside it)
        tracked(Path(src))
        run("wheel", [*wheel, "-w", str(folder), src])
    run("chart", [helm, "package", str(CHART), "--destination", str(folder)])
    images = built_images(tag)
    for image in images:
        target = folder / "images" / f"{image.repository}-{tag}.tar"
        try:
            os.link(image.tarball, target)  # (the same disk: no copy of the GiBs)
        except OSError:
            shutil.copyfile(image.tarball, target)
    script = folder / "push.sh"
    script.write_text(push_script(tag, images))
    script.chmod(0o755)
    for name in DOCUMENTS:
        shutil.copyfile(REPO / name, folder / name)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    sums = "".join(f"{sha256(p)}  {p.relative_to(folder).as_posix()}\n" for p in files)
    (folder / "SHA256SUMS").write_text(sums)
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hack/release.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "dist", help="(default: dist/)")
    p.add_argument("--python", default=sys.executable, help="the Python that builds the wheel")
    p.add_argument("--helm", default="", help="the helm binary (default: hack/tools.sh helm)")
    a = p.parse_args(argv)
    try:
        helm = a.helm or run("helm", [str(REPO / "hack" / "tools.sh"), "helm"]).strip()
        helm = helm.splitlines()[-1].split("=", 1)[-1]
        folder = release(a.out.resolve(), a.python, helm)
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size:>12}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
