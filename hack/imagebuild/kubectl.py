"""The kubectl layer: the kubectl hack/k8s-binaries.sh builds, at /usr/local/bin/kubectl."""

# prereqs: this file's system paths are inside the images (tests/test_prereqs.py)
from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import Any

from imagebuild import oci
from imagebuild.context import Context
from imagebuild.hashing import file_hash
from imagebuild.host import BuildError, run
from imagebuild.project import REPO


def kubectl_binary(ctx: Context) -> Path:
    if ctx.kubectl is not None:
        return ctx.kubectl
    out = run([str(REPO / "hack/k8s-binaries.sh"), "kubectl"])
    path = Path(out.strip().splitlines()[-1]) / "kubectl"
    if not os.access(path, os.X_OK):
        raise BuildError(f"hack/k8s-binaries.sh gave no kubectl at {path}")
    return path


def kubectl_layer(ctx: Context) -> oci.Layer:
    binary = kubectl_binary(ctx)
    key_doc = {"kind": "kubectl", "binary": file_hash(binary)}

    def make() -> oci.Layer:
        m = ctx.epoch
        entries: list[tuple[Any, Path | None]] = [
            (oci.tar_info(d, kind=tarfile.DIRTYPE, mode=0o755, mtime=m), None)
            for d in ("usr", "usr/local", "usr/local/bin")
        ]
        entries.append(
            (
                oci.tar_info(
                    "usr/local/bin/kubectl", mode=0o755, size=binary.stat().st_size, mtime=m
                ),
                binary,
            )
        )
        return ctx.store.write_layer(
            entries, gzip_it=True, created_by="kubectl at /usr/local/bin/kubectl"
        )

    return ctx.layer("kubectl", key_doc, make)
