"""One build's settings and its cache: layers by a hash of their inputs, blobs by digest."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagebuild import oci
from imagebuild.hashing import hash_inputs
from imagebuild.host import human, log, safe_rmtree

BUILDER_VERSION = "2"  # bump to rebuild every cached layer


@dataclass
class Context:
    cache: Path
    out: Path
    tag: str
    registry: str
    epoch: int
    mirror: str
    no_cache: bool
    rebuild_base: bool
    dgl_source: str
    kubectl: Path | None
    arch: str
    store: oci.BlobStore = field(init=False)
    built: dict[str, tuple[oci.Layer, bool, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.store = oci.BlobStore(self.cache / "blobs")
        for sub in ("layers", "base", "tmp", "logs"):
            (self.cache / sub).mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def workdir(self, name: str) -> Iterator[Path]:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.cache / "tmp"))
        try:
            yield path
        finally:
            safe_rmtree(path)

    def record_path(self, kind: str, key: str) -> Path:
        return self.cache / "layers" / f"{kind}-{key[:24]}.json"

    def cached_layer(self, kind: str, key: str) -> oci.Layer | None:
        if self.no_cache:
            return None
        path = self.record_path(kind, key)
        try:
            layer = oci.Layer.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return layer if self.store.has(layer.digest, layer.size) else None

    def save_layer(self, kind: str, key: str, layer: oci.Layer, *, prune: bool = False) -> None:
        path = self.record_path(kind, key)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(layer.to_json(), indent=1, sort_keys=True))
        os.replace(tmp, path)
        if prune:  # drop older layers of this kind (a DGL layer is 1.2-5.6 GB)
            # kind-<24 hex>.json: not the records of another kind named kind-something
            for other in (self.cache / "layers").glob(f"{kind}-{'?' * 24}.json"):
                if other == path:
                    continue
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    old = oci.Layer.from_json(json.loads(other.read_text()))
                    if old.digest != layer.digest:
                        self.store.path(old.digest).unlink(missing_ok=True)
                other.unlink(missing_ok=True)

    def layer(
        self,
        kind: str,
        key_doc: dict[str, Any],
        make: Callable[[], oci.Layer],
        *,
        prune: bool = False,
    ) -> oci.Layer:
        """The cached layer of ``kind`` for these inputs, or ``make()`` it (once per run)."""
        if kind in self.built:
            return self.built[kind][0]
        key = hash_inputs({"builder": BUILDER_VERSION, "epoch": self.epoch, **key_doc})
        start = time.monotonic()
        layer = self.cached_layer(kind, key)
        fresh = layer is None
        if layer is None:
            log(f"layer {kind}: building")
            layer = make()
            self.save_layer(kind, key, layer, prune=prune)
        seconds = time.monotonic() - start
        self.built[kind] = (layer, fresh, seconds)
        verb = "built" if fresh else "reused"
        log(
            f"layer {kind}: {verb} {layer.digest[:19]} ({human(layer.size)}, "
            f"{human(layer.uncompressed_size)} unpacked) in {seconds:.1f}s"
        )
        return layer


def fresh(
    ctx: Context, kind: str, key_doc: dict[str, Any], make: Callable[[], oci.Layer]
) -> oci.Layer:
    """``ctx.layer`` with the cache bypassed for this layer (then recorded as usual)."""
    saved = ctx.no_cache
    ctx.no_cache = True
    try:
        return ctx.layer(kind, key_doc, make)
    finally:
        ctx.no_cache = saved


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    """One build at a time per cache folder (an exclusive lock on ``<cache>/.lock``)."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
