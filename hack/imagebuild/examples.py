"""The examples layer: the GraphSAGE scripts and the synthetic dataset at /dgl_workspace."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from imagebuild import oci
from imagebuild.context import Context
from imagebuild.dgl import dgl_venv_site
from imagebuild.hashing import file_hash
from imagebuild.host import BuildError, run
from imagebuild.layout import NONROOT_UID
from imagebuild.project import REPO
from imagebuild.pysite import compile_tree

WORKSPACE = "dgl_workspace"
CHUNKS = 4  # chunks of the example's chunked graph (/dgl_workspace/chunked)


def dataset_python() -> str:
    """An interpreter with numpy, for make_dataset.py (the DGL venv's, else this one)."""
    site = dgl_venv_site()
    if site is not None:
        return str(site.parents[2] / "bin" / "python")
    if importlib.util.find_spec("numpy") is not None:
        return sys.executable
    raise BuildError("make_dataset.py needs numpy: run `make dgl-venv` first")


def examples_layer(ctx: Context) -> oci.Layer:
    """The example scripts at /dgl_workspace/code, and the synthetic ogbn-synth dataset at
    /dgl_workspace/raw_data (the proposal's premise: the raw dataset is in the image)."""
    src = REPO / "examples" / "graphsage"
    files = sorted(p for p in src.glob("*.py"))
    converter = [REPO / "distpart" / "convert.py", REPO / "chunkedgraph" / "__init__.py"]
    key_doc = {"kind": "examples", "files": [(p.name, file_hash(p)) for p in files],
               "dataset": "ogbn-synth seed 0, owned by 65532",
               "chunked": [(p.name, file_hash(p)) for p in converter] + [CHUNKS]}  # fmt: skip

    def make() -> oci.Layer:
        with ctx.workdir("examples") as work:
            code = work / "root" / WORKSPACE / "code"
            code.mkdir(parents=True)
            for p in files:
                shutil.copyfile(p, code / p.name)
            compile_tree(code, f"/{WORKSPACE}/code")
            raw = work / "root" / WORKSPACE / "raw_data"
            run([dataset_python(), str(src / "make_dataset.py"), "--root", str(raw)])
            run([dataset_python(), "-m", "distpart.convert", "ogb", "--dataset", "ogbn-synth",
                 "--root", str(raw), "--out", str(work / "root" / WORKSPACE / "chunked"),
                 "--num-chunks", str(CHUNKS), "--graph-name", "graphsage"],
                env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip

            def owner(name: str) -> tuple[int, int]:
                # ogb writes its processed/ cache beside the raw files: the dataset is the
                # (non-root) user's, the code is root's
                mine = name == WORKSPACE or name.startswith(f"{WORKSPACE}/raw_data")
                return (NONROOT_UID, NONROOT_UID) if mine else (0, 0)

            return ctx.store.write_layer(
                oci.tree_entries(work / "root", "", mtime=ctx.epoch, owner=owner),
                gzip_it=True,
                created_by=f"examples/graphsage/*.py at /{WORKSPACE}/code, ogbn-synth at "
                f"/{WORKSPACE}/raw_data and /{WORKSPACE}/chunked (/{WORKSPACE} owned by "
                f"{NONROOT_UID})",
            )

    return ctx.layer("examples", key_doc, make)
