"""The images: which layers each has, its config, and assembling it into a tarball."""

# prereqs: this file's system paths are inside the images (tests/test_prereqs.py)
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from imagebuild import oci
from imagebuild.app import app_layer
from imagebuild.base import BASE_PACKAGES, SUITE, VARIANT, base_layer
from imagebuild.context import Context
from imagebuild.dgl import DGL_SITE, VARIANTS, dgl_layer
from imagebuild.examples import WORKSPACE, examples_layer
from imagebuild.kubectl import kubectl_layer
from imagebuild.layout import APP_SITE, NONROOT_UID
from imagebuild.mpi import mpi_layer
from imagebuild.pause import pause_layer

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ImageSpec:
    repository: str
    title: str
    description: str
    layers: Callable[[Context], list[oci.Layer]]
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    workdir: str = "/"
    env: tuple[str, ...] = ()
    ports: tuple[str, ...] = ()
    python: bool = True
    tag_suffix: str = ""  # appended to the tag (graphsage-gpu: <tag>-gpu)
    default: bool = True  # built when --only is not given


APP_ENV = (f"PYTHONPATH=/{APP_SITE}", "PYTHONUNBUFFERED=1")


def app_layers(ctx: Context) -> list[oci.Layer]:
    """The base and the project with its dependencies: the operator's and init containers'."""
    return [base_layer(ctx), app_layer(ctx, deps=True, scripts=None)]


def graphsage(variant: str) -> ImageSpec:
    """The GraphSAGE example: the DGL environment's ``variant`` (imagebuild.dgl.VARIANTS) and
    dglrun; the gpu one is tagged <tag>-gpu and built only when asked for."""
    gpu = variant == "gpu"
    return ImageSpec(
        repository="graphsage",
        title="dgl-operator GraphSAGE example" + (" (CUDA)" if gpu else ""),
        description="Distributed GraphSAGE with DGL 2.1 / torch 2.2 and dglrun "
        f"(examples/graphsage at /dgl_workspace/code); {VARIANTS[variant].what}",
        layers=lambda c: [
            base_layer(c),
            mpi_layer(c),
            dgl_layer(c, variant),
            app_layer(c, deps=False, scripts={"dglrun", "dgl-chunk-graph"}),
            examples_layer(c),
        ],
        cmd=["dglrun", "--help"],
        workdir=f"/{WORKSPACE}",
        env=(
            f"PYTHONPATH=/{APP_SITE}:/{DGL_SITE}",
            "PYTHONUNBUFFERED=1",
            "DGLBACKEND=pytorch",
            "OUTDATED_IGNORE=1",
        ),
        tag_suffix="-gpu" if gpu else "",
        default=not gpu,
    )


IMAGES: dict[str, ImageSpec] = {
    "operator": ImageSpec(
        repository="dgl-operator",
        title="dgl-operator",
        description="Kubernetes operator for distributed DGL training (DGLJob qihoo.net/v1alpha1)",
        layers=app_layers,
        entrypoint=["/usr/local/bin/dgl-operator"],
        env=APP_ENV,
        ports=("8080/tcp", "8081/tcp"),
    ),
    "watcher-loop": ImageSpec(
        repository="watcher-loop",
        title="dgl-operator watcher-loop",
        description="Init container of DGLJob launcher pods: waits for the listed pods",
        layers=app_layers,
        entrypoint=["/usr/local/bin/watcher-loop"],
        env=APP_ENV,
    ),
    "kubectl-download": ImageSpec(
        repository="kubectl-download",
        title="dgl-operator kubectl-download",
        description="Init container of DGLJob launcher pods: installs a verified kubectl into "
        "/opt/kube (the baked /usr/local/bin/kubectl, or KUBECTL_URL + KUBECTL_SHA256)",
        layers=lambda c: [*app_layers(c), kubectl_layer(c)],
        entrypoint=["/usr/local/bin/kubectl-download"],
        env=(*APP_ENV, "TARGET_DIR=/opt/kube", "KUBECTL_SOURCE=/usr/local/bin/kubectl"),
    ),
    "graphsage": graphsage("cpu"),
    "graphsage-gpu": graphsage("gpu"),
    "pause": ImageSpec(
        repository="pause",
        title="dgl-operator pause",
        description="Pod sandbox image: sleeps until SIGTERM",
        layers=lambda c: [pause_layer(c)],
        entrypoint=["/pause"],
        python=False,
    ),
}


def image_config(ctx: Context, spec: ImageSpec, created: str) -> dict[str, Any]:
    labels = {
        "org.opencontainers.image.title": spec.title,
        "org.opencontainers.image.description": spec.description,
        "org.opencontainers.image.version": ctx.tag,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.vendor": "dgl-operator",
        "org.opencontainers.image.base.name": (
            f"debian:{SUITE} (debootstrap --variant={VARIANT} + {' '.join(BASE_PACKAGES)})"
            if spec.python
            else "scratch"
        ),
    }
    config: dict[str, Any] = {
        "User": f"{NONROOT_UID}:{NONROOT_UID}",
        "Env": [PATH_ENV, "LANG=C.UTF-8", *spec.env] if spec.python else [PATH_ENV],
        "WorkingDir": spec.workdir,
        "Labels": labels,
    }
    if spec.entrypoint is not None:
        config["Entrypoint"] = spec.entrypoint
    if spec.cmd is not None:
        config["Cmd"] = spec.cmd
    if spec.ports:
        config["ExposedPorts"] = {port: {} for port in spec.ports}
    return config


@dataclass
class Result:
    image: str
    reference: str
    tarball: str
    manifest_digest: str
    config_digest: str
    layers: list[dict[str, Any]]
    size: int
    unpacked_size: int
    built: bool
    seconds: float


def build_image(ctx: Context, name: str) -> Result:
    spec = IMAGES[name]
    start = time.monotonic()
    before = set(ctx.built)
    layers = spec.layers(ctx)
    fresh = [k for k in ctx.built if k not in before and ctx.built[k][1]]
    created = datetime.fromtimestamp(ctx.epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    tag = ctx.tag + spec.tag_suffix
    reference = f"{ctx.registry}/{spec.repository}:{tag}"
    image = oci.assemble_image(
        ctx.store,
        name=reference,
        tag=tag,
        layers=layers,
        config=image_config(ctx, spec, created),
        created=created,
        platform=("linux", ctx.arch),
        annotations={
            "org.opencontainers.image.title": spec.title,
            "org.opencontainers.image.version": ctx.tag,
        },
    )
    tarball = ctx.out / f"{spec.repository}-{tag}.tar"
    wrote = ctx.no_cache or oci.tarball_manifest_digest(tarball) != image.manifest_digest
    if wrote:
        oci.write_layout_tarball(ctx.store, image, tarball, mtime=ctx.epoch)
    seconds = time.monotonic() - start
    return Result(
        image=name,
        reference=reference,
        tarball=str(tarball),
        manifest_digest=image.manifest_digest,
        config_digest=image.config_digest,
        layers=[layer.to_json() for layer in layers],
        size=tarball.stat().st_size,
        unpacked_size=sum(layer.uncompressed_size for layer in layers),
        built=bool(fresh) or wrote,
        seconds=seconds,
    )
