"""Reading OCI image-layout tarballs independently of the builder (hack/imagebuild/oci.py)."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
CHUNK = 1 << 20


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class HashingReader:
    """Hashes and counts every byte read through it."""

    def __init__(self, source: _Readable) -> None:
        self._source = source
        self.sha = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1, /) -> bytes:
        data = self._source.read(size)
        self.sha.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


@dataclass
class LayerScan:
    digest: str  # of the blob as stored
    size: int
    diff_id: str  # of the uncompressed tar
    members: list[tarfile.TarInfo] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # small regular files' contents
    heads: dict[str, bytes] = field(default_factory=dict)  # first bytes of every regular file
    marker_hits: dict[str, list[str]] = field(default_factory=dict)  # marker -> member names

    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def member(self, name: str) -> tarfile.TarInfo:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)


def scan_layer(
    blob: _Readable,
    media_type: str,
    *,
    keep_max: int = 64 * 1024,
    markers: tuple[bytes, ...] = (),
) -> LayerScan:
    """One pass over a layer blob: its digest, its uncompressed digest, its members, the
    contents of its regular files up to ``keep_max`` bytes, and which regular files contain
    any of ``markers``."""
    outer = HashingReader(blob)
    inner: HashingReader
    if media_type == LAYER_GZIP:
        inner = HashingReader(gzip.GzipFile(fileobj=outer, mode="rb"))  # type: ignore[call-overload]
    elif media_type == LAYER_TAR:
        inner = outer
    else:
        raise ValueError(f"unexpected layer media type {media_type}")
    scan = LayerScan(digest="", size=0, diff_id="")
    with tarfile.open(fileobj=inner, mode="r|") as t:  # type: ignore[call-overload]
        for m in t:
            scan.members.append(m)
            if not m.isreg():
                continue
            f = t.extractfile(m)
            assert f is not None
            if m.size > keep_max and not markers:
                scan.heads[m.name] = f.read(16)
                continue
            data = f.read()
            scan.heads[m.name] = data[:16]
            if m.size <= keep_max:
                scan.files[m.name] = data
            for marker in markers:
                if marker in data:
                    scan.marker_hits.setdefault(marker.decode(), []).append(m.name)
    inner.drain()
    outer.drain()
    scan.digest, scan.size, scan.diff_id = outer.digest, outer.size, inner.digest
    return scan


class OciTarball:
    """An image-layout tarball opened for random access."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tar = tarfile.open(path, "r:")  # noqa: SIM115 (closed by close())
        self.members = self.tar.getmembers()
        self.by_name = {m.name: m for m in self.members}

    def close(self) -> None:
        self.tar.close()

    def read(self, name: str) -> bytes:
        f = self.tar.extractfile(self.by_name[name])
        assert f is not None
        return f.read()

    def json(self, name: str) -> Any:
        return json.loads(self.read(name))

    @staticmethod
    def blob_name(digest: str) -> str:
        algo, _, hexdigest = digest.partition(":")
        assert algo == "sha256", digest
        return f"blobs/sha256/{hexdigest}"

    def open_blob(self, digest: str) -> IO[bytes]:
        f = self.tar.extractfile(self.by_name[self.blob_name(digest)])
        assert f is not None
        return f

    def blob_size(self, digest: str) -> int:
        return self.by_name[self.blob_name(digest)].size

    @property
    def index(self) -> Any:
        return self.json("index.json")

    @property
    def manifest_descriptor(self) -> Any:
        return self.index["manifests"][0]

    @property
    def manifest(self) -> Any:
        return self.json(self.blob_name(self.manifest_descriptor["digest"]))

    @property
    def config(self) -> Any:
        return self.json(self.blob_name(self.manifest["config"]["digest"]))
