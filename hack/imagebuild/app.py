"""The app layers: this project (and its runtime dependencies) at /opt/dgl-operator."""

# prereqs: this file's system paths are inside the images (tests/test_prereqs.py)
from __future__ import annotations

import configparser
import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

from imagebuild import oci
from imagebuild.context import Context
from imagebuild.hashing import file_hash, tree_hash
from imagebuild.host import BuildError, log, run
from imagebuild.layout import APP_SITE
from imagebuild.project import PACKAGES, PROJECT_FILES, REPO
from imagebuild.pysite import compile_tree, pip_env, pip_install, tidy_site

CONSTRAINTS = REPO / "images" / "app-constraints.txt"  # the dependencies' versions, pinned


def _pycache(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo")


def project_hash() -> str:
    h = hashlib.sha256()
    for name in PROJECT_FILES:
        h.update(f"{name}\0{file_hash(REPO / name)}\n".encode())
    for package in PACKAGES:
        h.update(f"{package}\0{tree_hash(REPO / package, skip=_pycache)}\n".encode())
    return h.hexdigest()


def copy_project(dest: Path) -> None:
    dest.mkdir(parents=True)
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, dest / name)
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def build_wheel(work: Path) -> Path:
    src = work / "src"
    copy_project(src)
    wheels = work / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels)]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        cmd.append("--no-build-isolation")
    run([*cmd, str(src)], env=pip_env())
    found = sorted(wheels.glob("dgl_operator-*.whl"))
    if len(found) != 1:
        raise BuildError(f"pip wheel produced {found}, expected one dgl_operator wheel")
    return found[0]


def write_wrappers(site: Path, bin_dir: Path, only: set[str] | None) -> list[str]:
    """/usr/local/bin wrappers for the project's console scripts (interpreter /usr/bin/python3;
    imports come from PYTHONPATH, set in the image config)."""
    entry_points = sorted(site.glob("dgl_operator-*.dist-info/entry_points.txt"))
    if len(entry_points) != 1:
        raise BuildError(f"no single dgl_operator dist-info in {site}")
    parser = configparser.ConfigParser()
    parser.read(entry_points[0])
    bin_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for name, target in sorted(parser.items("console_scripts")):
        if only is not None and name not in only:
            continue
        module, _, attr = target.partition(":")
        head = attr.split(".")[0]
        path = bin_dir / name
        path.write_text(
            "#!/usr/bin/python3\n"
            f"# {name}: console script of dgl-operator (written by hack/build_images.py)\n"
            "import sys\n"
            f"from {module.strip()} import {head.strip()}\n"
            "\n"
            'if __name__ == "__main__":\n'
            f"    sys.exit({attr.strip()}())\n"
        )
        path.chmod(0o755)
        names.append(name)
    if only is not None and set(names) != only:
        raise BuildError(f"console scripts {sorted(only - set(names))} not in the project")
    return names


def app_layer(ctx: Context, *, deps: bool, scripts: set[str] | None) -> oci.Layer:
    kind = "app" if deps else "app-" + "-".join(sorted(scripts or ()))
    key_doc = {
        "kind": kind,
        "project": project_hash(),
        "deps": deps,
        "scripts": sorted(scripts) if scripts is not None else None,
        "python": list(sys.version_info[:2]),
        "constraints": file_hash(CONSTRAINTS) if deps else None,
    }

    def make() -> oci.Layer:
        with ctx.workdir(kind) as work:
            wheel = build_wheel(work)
            root = work / "root"
            site = root / APP_SITE
            deps_option = ("-c", str(CONSTRAINTS)) if deps else ("--no-deps",)
            pip_install(
                site, "--no-warn-script-location", "--only-binary=:all:", *deps_option, str(wheel)
            )
            tidy_site(site)
            compile_tree(site, "/" + APP_SITE)
            names = write_wrappers(site, root / "usr/local/bin", scripts)
            dists = sorted(p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info"))
            log(f"layer {kind}: {', '.join(dists)}")
            what = "dgl-operator and its runtime dependencies" if deps else "dgl-operator (no deps)"
            return ctx.store.write_layer(
                oci.tree_entries(root, "", mtime=ctx.epoch),
                gzip_it=True,
                created_by=f"pip install --target /{APP_SITE} {what}; "
                f"/usr/local/bin/{{{','.join(names)}}}",
            )

    return ctx.layer(kind, key_doc, make)
