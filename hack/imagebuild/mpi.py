"""The mpi layer: Open MPI and PT-Scotch, what a second debootstrap has beyond the base."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path
from typing import Any

from imagebuild import oci
from imagebuild.base import BASE_PACKAGES, base_key, base_layer, base_rootfs_tar, debootstrap_tree
from imagebuild.context import Context
from imagebuild.host import log

# Open MPI and PT-Scotch's ParMETIS API (the ParMETIS modes)
MPI_PACKAGES = ("openmpi-bin", "libptscotch-7.0")


def _signature(info: tarfile.TarInfo, content: bytes | Path | None) -> tuple[Any, ...]:
    """What makes two root filesystem entries the same file (not their mtimes: debootstrap
    stamps what it generates with the time of the run)."""
    digest = ""
    if info.isreg():
        h = hashlib.sha256()
        if isinstance(content, bytes):
            h.update(content)
        elif content is not None:
            with content.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        digest = h.hexdigest()
    return (info.type, info.mode, info.uid, info.gid, info.linkname, info.size, digest)


def _tar_signatures(tar_path: Path) -> dict[str, tuple[Any, ...]]:
    out = {}
    with tarfile.open(tar_path) as t:
        for member in t:
            f = t.extractfile(member) if member.isreg() else None
            out[member.name] = _signature(member, f.read() if f is not None else None)
    return out


def rootfs_diff(
    base_tar: Path, root: Path
) -> tuple[list[tuple[tarfile.TarInfo, Path | None]], int]:
    """Entries of ``root`` that the base root filesystem lacks or has otherwise (new and
    changed files, new directories), in ``rootfs_entries`` order; and how many base entries
    ``root`` does not have (installing packages deletes nothing: kept, not whited out)."""
    base = _tar_signatures(base_tar)
    entries = list(oci.rootfs_entries(root))
    taken: set[str] = set()
    out: list[tuple[tarfile.TarInfo, Path | None]] = []
    for info, content in entries:
        if info.type == tarfile.LNKTYPE:
            sig = _signature(info, None)
            if base.get(info.name) == sig and info.linkname not in taken:
                continue
            if info.linkname not in taken:  # its target is in the base: ship a copy
                path = root / info.name
                info = oci.tar_info(
                    info.name, size=path.stat().st_size, mode=info.mode, mtime=int(info.mtime),
                    uid=info.uid, gid=info.gid,
                )  # fmt: skip
                content = path
        elif base.get(info.name) == _signature(info, content):
            continue
        taken.add(info.name)
        out.append((info, content))
    names = {info.name for info, _ in entries}
    return out, sum(1 for name in base if name not in names)


def mpi_layer(ctx: Context) -> oci.Layer:
    """Open MPI (mpirun, orted, libmpi) and PT-Scotch's ParMETIS API, for the ParMETIS modes:
    what a debootstrap with these packages has that the base does not."""
    base_layer(ctx)  # its root filesystem tar is what this layer is the difference from
    base_tar = base_rootfs_tar(ctx)
    key_doc = {
        "kind": "mpi",
        "base": base_key(ctx),
        "packages": list(MPI_PACKAGES),
        "mirror": ctx.mirror,
        "arch": ctx.arch,
    }

    def make() -> oci.Layer:
        with ctx.workdir("mpi") as work:
            root = work / "root"
            debootstrap_tree(ctx, root, (*BASE_PACKAGES, *MPI_PACKAGES), "mpi")
            entries, missing = rootfs_diff(base_tar, root)
            log(f"mpi: {len(entries)} entries beyond the base ({missing} base entries absent)")
            return ctx.store.write_layer(
                entries,
                gzip_it=True,
                created_by=f"debootstrap --include={','.join(MPI_PACKAGES)} (what the base lacks)",
            )

    return ctx.layer("mpi", key_doc, make)
