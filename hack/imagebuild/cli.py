"""The command line of hack/build_images.py."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from imagebuild.base import DEFAULT_MIRROR
from imagebuild.context import Context, cache_lock
from imagebuild.host import BuildError, human, log
from imagebuild.images import IMAGES, Result, build_image
from imagebuild.project import version

DEFAULT_EPOCH = 1704067200  # 2024-01-01T00:00:00Z: mtime of every file of our own layers
DEFAULT_REGISTRY = "docker.io/dgloperator"


def host_arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    cache = Path(os.environ.get("DGL_OPERATOR_CACHE", Path.home() / ".cache/dgl-operator"))
    p = argparse.ArgumentParser(
        prog="build_images.py",
        description="Build the dgl-operator images as OCI image-layout tarballs (no Docker).",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=cache / "images" / "out",
        help="directory for the tarballs (default: %(default)s)",
    )
    defaults = [name for name, spec in IMAGES.items() if spec.default]
    p.add_argument(
        "--only",
        default=",".join(defaults),
        help=f"comma-separated images of {','.join(IMAGES)} (default: {','.join(defaults)}; "
        "graphsage-gpu is graphsage with torch's CUDA wheels, tagged <tag>-gpu)",
    )
    p.add_argument("--tag", default=None, help="image tag (default: setup.cfg's version)")
    p.add_argument(
        "--registry",
        default=DEFAULT_REGISTRY,
        help="repository prefix of the image names (default: %(default)s)",
    )
    p.add_argument(
        "--cache", type=Path, default=cache / "images", help="layer cache (default: %(default)s)"
    )
    p.add_argument(
        "--mirror",
        default=os.environ.get("DEBIAN_MIRROR", DEFAULT_MIRROR),
        help="Debian mirror for debootstrap (default: $DEBIAN_MIRROR or %(default)s)",
    )
    p.add_argument(
        "--kubectl",
        type=Path,
        default=None,
        help="kubectl to bake (default: what hack/k8s-binaries.sh kubectl builds)",
    )
    p.add_argument(
        "--dgl-source",
        choices=("auto", "venv", "pip"),
        default="auto",
        help="graphsage's DGL environment: the DGL venv (`make dgl-venv`), pip "
        "install -r requirements-dgl.txt, or auto (the venv when ready)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="rebuild every layer (the cached base root filesystem is re-packed, "
        "not re-bootstrapped) and rewrite every tarball",
    )
    p.add_argument(
        "--rebuild-base",
        action="store_true",
        help="run debootstrap again even if the base root filesystem is cached",
    )
    p.add_argument("--json", type=Path, default=None, help="also write a JSON summary here")
    args = p.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in IMAGES]
    if unknown or not only:
        p.error(f"--only: unknown image(s) {unknown}; choose from {', '.join(IMAGES)}")
    args.only = only
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if sys.version_info[:2] != (3, 11):
        log(f"needs Python 3.11 (the images' python3), this is {platform.python_version()}")
        return 2
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_EPOCH))
    total = time.monotonic()
    results: list[Result] = []
    try:
        with cache_lock(args.cache):
            ctx = Context(
                cache=args.cache,
                out=args.out.resolve(),
                tag=args.tag or version(),
                registry=args.registry.rstrip("/"),
                epoch=epoch,
                mirror=args.mirror,
                no_cache=args.no_cache,
                rebuild_base=args.rebuild_base,
                dgl_source=args.dgl_source,
                kubectl=args.kubectl,
                arch=host_arch(),
            )
            for name in args.only:
                result = build_image(ctx, name)
                results.append(result)
                log(
                    f"image {name}: {'built' if result.built else 'reused'} "
                    f"{result.reference} {result.manifest_digest[:19]} "
                    f"{human(result.size)} tarball ({human(result.unpacked_size)} unpacked) "
                    f"in {result.seconds:.1f}s"
                )
    except BuildError as e:
        log(f"error: {e}")
        return 1
    log(f"done in {time.monotonic() - total:.1f}s")
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2) + "\n")
    for r in results:
        print(r.tarball)
    return 0
