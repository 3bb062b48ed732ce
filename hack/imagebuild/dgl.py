"""The dgl layer: the DGL environment of requirements-dgl.txt at /opt/dgl/site-packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from imagebuild import oci
from imagebuild.context import Context
from imagebuild.hashing import file_hash
from imagebuild.host import BuildError, log
from imagebuild.project import REPO
from imagebuild.pysite import compile_tree, pip_install, tidy_site

DGL_SITE = "opt/dgl/site-packages"
DGL_EXCLUDE_TOP = ("pip",)  # venv tooling, not part of requirements-dgl.txt


def dgl_venv_site() -> Path | None:
    """site-packages of the DGL venv `make dgl-venv` built (None if it is not ready)."""
    python = os.environ.get("DGL_PYTHON")
    if not python:
        key = file_hash(REPO / "requirements-dgl.txt")[:12]
        cache = Path(os.environ.get("DGL_OPERATOR_CACHE", Path.home() / ".cache/dgl-operator"))
        python = str(cache / f"venv-dgl-{key}" / "bin" / "python")
    venv = Path(python).parent.parent
    if not (venv / ".ready").exists() or not Path(python).exists():
        return None
    out = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=False,
    )
    site = Path(out.stdout.strip())
    return site if out.returncode == 0 and site.is_dir() else None


def link_tree(src: Path, dest: Path, exclude: Callable[[Path], bool]) -> None:
    """Hard-link (copy across file systems) ``src`` to ``dest`` without the excluded paths."""
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        target = dest / here.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        dirnames[:] = [d for d in dirnames if not exclude(here / d)]
        for name in filenames:
            path = here / name
            if exclude(path):
                continue
            out = target / name
            if path.is_symlink():
                out.symlink_to(os.readlink(path))
                continue
            try:
                os.link(path, out)
            except OSError:
                shutil.copy2(path, out)
        for d in dirnames:  # symlinked directories are not walked: keep them as links
            if (here / d).is_symlink():
                (target / d).symlink_to(os.readlink(here / d))
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]


def dgl_layer(ctx: Context) -> oci.Layer:
    requirements = REPO / "requirements-dgl.txt"
    site = dgl_venv_site() if ctx.dgl_source in ("auto", "venv") else None
    if ctx.dgl_source == "venv" and site is None:
        raise BuildError("the DGL venv is not ready: run `make dgl-venv` (or --dgl-source pip)")
    if site is not None:
        records = sorted(
            (p.parent.name, file_hash(p))
            for p in site.glob("*.dist-info/RECORD")
            if not p.parent.name.startswith("pip-")
        )
        key_doc: dict[str, Any] = {"kind": "dgl", "source": "venv", "records": records}
    else:
        key_doc = {"kind": "dgl", "source": "pip"}
    key_doc.update(
        requirements=file_hash(requirements),
        python=list(sys.version_info[:2]),
        exclude=list(DGL_EXCLUDE_TOP),
    )

    def exclude(path: Path) -> bool:
        if path.name == "__pycache__" or path.suffix == ".pyc":
            return True
        if site is not None and path.parent == site:
            return path.name in DGL_EXCLUDE_TOP or path.name.startswith("pip-")
        return False

    def make() -> oci.Layer:
        with ctx.workdir("dgl") as work:
            root = work / "root"
            stage = root / DGL_SITE
            start = time.monotonic()
            if site is not None:
                log(f"layer dgl: hard-linking {site}")
                link_tree(site, stage, exclude)
            else:
                log("layer dgl: pip install -r requirements-dgl.txt (downloads ~2.5 GB)")
                # --prefer-binary: littleutils (ogb -> outdated) is an sdist only
                pip_install(stage, "--prefer-binary", "-r", str(requirements))
                tidy_site(stage)
            log(f"layer dgl: staged in {time.monotonic() - start:.0f}s; byte-compiling")
            start = time.monotonic()
            compile_tree(stage, "/" + DGL_SITE)
            log(f"layer dgl: compiled in {time.monotonic() - start:.0f}s; writing the layer")
            return ctx.store.write_layer(
                oci.tree_entries(root, "", mtime=ctx.epoch),
                gzip_it=False,
                created_by=f"DGL environment of requirements-dgl.txt at /{DGL_SITE}",
            )

    return ctx.layer("dgl", key_doc, make, prune=True)
