"""The dgl layer: the DGL environment of requirements-dgl.txt at /opt/dgl/site-packages, in
one of :data:`VARIANTS`: ``cpu`` (the graphsage image) or ``gpu`` (graphsage-gpu)."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagebuild import cudastub, oci
from imagebuild.context import Context
from imagebuild.hashing import file_hash
from imagebuild.host import BuildError, find_tool, log, run
from imagebuild.project import REPO
from imagebuild.pysite import compile_tree, pip_install, tidy_site

DGL_SITE = "opt/dgl/site-packages"
DGL_EXCLUDE_TOP = ("pip",)  # venv tooling, not part of requirements-dgl.txt


@dataclass(frozen=True)
class Variant:
    """What a variant leaves out of the DGL environment: whole distributions (the files their
    RECORD lists) and files matching globs; a left-out library a kept one still needs is
    replaced by a stub (:mod:`imagebuild.cudastub`)."""

    what: str
    drop_dists: tuple[str, ...] = ()
    drop_files: tuple[str, ...] = ()


VARIANTS = {
    "cpu": Variant(
        what="CPU only: torch without its CUDA libraries (stubs in their place)",
        # kept: nvidia-cuda-runtime-cu12, -cuda-cupti-cu12 and -nvtx-cu12 (49 MB), which
        # libtorch_cpu.so, libc10_cuda.so and libtorch_python.so load (no device without a driver)
        drop_dists=(
            "nvidia-cublas-cu12",
            "nvidia-cuda-nvrtc-cu12",
            "nvidia-cudnn-cu12",
            "nvidia-cufft-cu12",
            "nvidia-curand-cu12",
            "nvidia-cusolver-cu12",
            "nvidia-cusparse-cu12",
            "nvidia-nccl-cu12",
            "nvidia-nvjitlink-cu12",
            "triton",
        ),
        drop_files=(
            "torch/lib/libtorch_cuda.so",
            "torch/lib/libtorch_cuda_linalg.so",
            "torch/lib/libcaffe2_nvrtc.so",
            "torch/lib/libcusparseLt-*.so*",
        ),
    ),
    "gpu": Variant(what="torch 2.2.1 with its CUDA 12.1 wheels (nvidia-*, triton)"),
}
STUB_HINT = (
    "torch's CUDA libraries are not in this CPU image (a stub stands in for this one); "
    "the graphsage image tagged <version>-gpu has them"
)
# what the build imports from the staged CPU environment before writing the layer
CPU_PROBE = (
    "import torch, dgl\n"
    "assert not torch.cuda.is_available()\n"
    "try:\n"
    "    torch.cuda.graph_pool_handle()\n"
    "except RuntimeError as e:\n"
    "    assert 'not in this CPU image' in str(e), e\n"
    "else:\n"
    "    raise AssertionError('a CUDA stub returned')\n"
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def dropped_files(site: Path, variant: Variant) -> list[Path]:
    """The files of ``site`` that ``variant`` leaves out (RECORDs of its dists, its globs)."""
    out: set[Path] = set()
    wanted = {canonical(d) for d in variant.drop_dists}
    for info in site.glob("*.dist-info"):
        name = canonical(info.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        if name not in wanted:
            continue
        wanted.discard(name)
        for row in csv.reader((info / "RECORD").read_text().splitlines()):
            path = site / row[0] if row and not row[0].startswith("..") else None
            if path is not None and (path.is_file() or path.is_symlink()):
                out.add(path)
    if wanted:
        raise BuildError(f"the DGL environment has no distribution {sorted(wanted)} to leave out")
    for pattern in variant.drop_files:
        found = list(site.glob(pattern))
        if not found:
            raise BuildError(f"the DGL environment has no {pattern} to leave out")
        out.update(found)
    return sorted(out)


def prune_empty_dirs(root: Path) -> None:
    for dirpath, _dirnames, _filenames in sorted(os.walk(root), reverse=True):
        path = Path(dirpath)
        if path != root and not any(path.iterdir()):
            path.rmdir()


def trim(site: Path, variant: Variant, work: Path) -> None:
    """Leave out what ``variant`` drops, stub what kept files still need, and check that the
    CPU environment imports (this interpreter: Python 3.11, the image's ABI)."""
    dropped = dropped_files(site, variant)
    if not dropped:
        return
    size = sum(p.lstat().st_size for p in dropped)
    stubbed = cudastub.stub_dropped(site, dropped, work, STUB_HINT)
    prune_empty_dirs(site)
    for _, w in sorted(stubbed.items()):
        log(f"layer dgl: stub {w.path.relative_to(site)} ({len(w.symbols)} symbols, for "
            f"{', '.join(sorted(w.users))})")  # fmt: skip
    log(f"layer dgl: left out {len(dropped)} files ({size / 1e6:.0f} MB)")
    home = work / "home"
    home.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site), HOME=str(home), DGLBACKEND="pytorch",
               PYTHONDONTWRITEBYTECODE="1", OUTDATED_IGNORE="1")  # fmt: skip
    run([sys.executable, "-S", "-c", CPU_PROBE], env=env)


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


def dgl_layer(ctx: Context, variant: str) -> oci.Layer:
    spec = VARIANTS[variant]
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
        variant=variant,
        drop_dists=list(spec.drop_dists),
        drop_files=list(spec.drop_files),
    )
    if spec.drop_dists or spec.drop_files:
        key_doc.update(
            stubs=file_hash(Path(cudastub.__file__)),
            gcc=run([find_tool("gcc"), "--version"]).splitlines()[0],
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
            trim(stage, spec, work)
            log(f"layer dgl: staged in {time.monotonic() - start:.0f}s; byte-compiling")
            start = time.monotonic()
            compile_tree(stage, "/" + DGL_SITE)
            log(f"layer dgl: compiled in {time.monotonic() - start:.0f}s; writing the layer")
            return ctx.store.write_layer(
                oci.tree_entries(root, "", mtime=ctx.epoch),
                gzip_it=False,
                created_by=f"DGL environment of requirements-dgl.txt at /{DGL_SITE} "
                f"({variant}: {spec.what})",
            )

    return ctx.layer(f"dgl-{variant}", key_doc, make, prune=True)
