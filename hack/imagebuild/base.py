"""The base layer: Debian from debootstrap, cleaned, with the user nonroot (needs root)."""

# prereqs: this file's system paths are inside the images (tests/test_prereqs.py)
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from imagebuild import oci
from imagebuild.context import Context, fresh
from imagebuild.hashing import hash_inputs
from imagebuild.host import BuildError, find_tool, human, log, run
from imagebuild.layout import NONROOT_NAME, NONROOT_UID

SUITE = "bookworm"
VARIANT = "minbase"
BASE_PACKAGES = ("python3", "ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_CLEANUP_VERSION = "2"  # bump when clean_rootfs changes


def clean_rootfs(root: Path) -> None:
    """Remove what an image does not need and what depends on the build host or time, and add
    the nonroot user."""

    def empty(rel: str, keep: Callable[[Path], bool] = lambda p: False) -> None:
        directory = root / rel
        if not directory.is_dir():
            return
        for child in directory.iterdir():
            if keep(child):
                continue
            if child.is_dir() and not child.is_symlink():
                # keep the directory of a package's copyright file
                if any(keep(p) for p in child.rglob("*")):
                    for p in sorted(child.rglob("*"), reverse=True):
                        if not keep(p) and not p.is_dir():
                            p.unlink()
                    continue
                shutil.rmtree(child)
            else:
                child.unlink()

    empty("var/lib/apt/lists", keep=lambda p: p.name == "partial")
    empty("var/cache/apt", keep=lambda p: p.name == "archives")
    empty("var/cache/apt/archives", keep=lambda p: p.name == "partial")
    empty("var/cache/debconf", keep=lambda p: not p.name.endswith("-old"))
    empty("var/lib/dpkg", keep=lambda p: not p.name.endswith("-old"))
    empty("var/log")
    empty("usr/share/doc", keep=lambda p: p.name == "copyright")
    empty("usr/share/man")
    empty("usr/share/info")
    empty("usr/share/locale", keep=lambda p: p.name == "locale.alias")
    empty("usr/share/lintian")
    empty("dev")
    empty("tmp")
    empty("run")
    for rel in (
        "etc/hostname",
        "etc/resolv.conf",
        "etc/machine-id",
        "var/cache/ldconfig/aux-cache",
    ):
        (root / rel).unlink(missing_ok=True)

    etc = root / "etc"
    uid = NONROOT_UID
    lines = {
        "passwd": f"{NONROOT_NAME}:x:{uid}:{uid}:nonroot:/home/{NONROOT_NAME}:/usr/sbin/nologin",
        "group": f"{NONROOT_NAME}:x:{uid}:",
        "shadow": f"{NONROOT_NAME}:!:0:0:99999:7:::",
        "gshadow": f"{NONROOT_NAME}:!::",
    }
    for name, line in lines.items():
        path = etc / name
        text = path.read_text() if path.exists() else ""
        if f"{NONROOT_NAME}:" not in text:
            st = path.stat() if path.exists() else None
            path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + line + "\n")
            if st is not None:
                os.chown(path, st.st_uid, st.st_gid)
                os.chmod(path, st.st_mode & 0o7777)
        (etc / f"{name}-").unlink(missing_ok=True)  # backups naming the build's previous state
    home = root / "home" / NONROOT_NAME
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, uid, uid)
    os.chmod(home, 0o755)


def base_doc(ctx: Context) -> dict[str, Any]:
    return {
        "kind": "base",
        "suite": SUITE,
        "variant": VARIANT,
        "packages": list(BASE_PACKAGES),
        "mirror": ctx.mirror,
        "arch": ctx.arch,
        "cleanup": BASE_CLEANUP_VERSION,
        "nonroot": NONROOT_UID,
    }


def base_key(ctx: Context) -> str:
    return hash_inputs(base_doc(ctx))


def base_rootfs_tar(ctx: Context) -> Path:
    """Where the base's root filesystem tar is cached (the mpi layer is its difference)."""
    return ctx.cache / "base" / f"rootfs-{SUITE}-{ctx.arch}-{base_key(ctx)[:16]}.tar"


def base_layer(ctx: Context) -> oci.Layer:
    """The cleaned root filesystem (debootstrapped once, then cached as a tar), gzipped."""
    key_doc = base_doc(ctx)
    rootfs_tar = base_rootfs_tar(ctx)

    def make() -> oci.Layer:
        if ctx.rebuild_base or not rootfs_tar.exists():
            debootstrap_rootfs(ctx, rootfs_tar)
        else:
            log(f"base: cached root filesystem {rootfs_tar}")
        return ctx.store.gzip_tar_file(
            rootfs_tar,
            created_by=f"debootstrap --variant={VARIANT} --include={','.join(BASE_PACKAGES)} "
            f"{SUITE} (cleaned; user {NONROOT_NAME} {NONROOT_UID})",
        )

    if ctx.rebuild_base:
        return fresh(ctx, "base", key_doc, make)
    return ctx.layer("base", key_doc, make)


def debootstrap_tree(ctx: Context, root: Path, packages: Sequence[str], what: str) -> None:
    """A cleaned Debian root filesystem with ``packages`` at ``root``."""
    if os.geteuid() != 0:
        raise BuildError(f"building the {what} root filesystem needs root (debootstrap chroots)")
    debootstrap = find_tool("debootstrap")
    log_file = ctx.cache / "logs" / f"debootstrap-{what}.log"
    start = time.monotonic()
    log(f"{what}: debootstrap {SUITE} from {ctx.mirror} (log: {log_file})")
    run(
        [
            debootstrap,
            f"--variant={VARIANT}",
            f"--include={','.join(packages)}",
            f"--arch={ctx.arch}",
            SUITE,
            str(root),
            ctx.mirror,
        ],
        log_file=log_file,
    )
    log(f"{what}: debootstrap done in {time.monotonic() - start:.0f}s")
    version = (root / "usr/bin/python3").resolve().name
    if version != "python3.11":
        raise BuildError(f"the {what}'s python3 is {version}, the layers need python3.11")
    clean_rootfs(root)


def debootstrap_rootfs(ctx: Context, rootfs_tar: Path) -> None:
    with ctx.workdir("rootfs") as work:
        root = work / "root"
        debootstrap_tree(ctx, root, BASE_PACKAGES, "base")
        tmp = rootfs_tar.with_suffix(".tmp")
        with tmp.open("wb") as f:
            oci.write_tar(f, oci.rootfs_entries(root))
        os.replace(tmp, rootfs_tar)
        for old in rootfs_tar.parent.glob(f"rootfs-{SUITE}-{ctx.arch}-*.tar"):
            if old != rootfs_tar:
                old.unlink(missing_ok=True)
        log(f"base: root filesystem {rootfs_tar} ({human(rootfs_tar.stat().st_size)})")
