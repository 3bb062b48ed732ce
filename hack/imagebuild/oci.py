"""Deterministic OCI image pieces with the standard library only: layers, blobs, image layouts.

Used by the layer and image modules of :mod:`imagebuild`. Everything written here depends only
on its inputs:

* layer tars list their entries in sorted order with fixed mtimes (or the ones given), numeric
  owners without names, normalised modes, PAX format; gzip streams have mtime 0 and no name;
* JSON documents are serialised with sorted keys and no whitespace;
* an image-layout tarball (``oci-layout``, ``index.json``, ``blobs/sha256/...``) lists its
  members in a fixed order with fixed metadata.

``ctr images import`` accepts the tarballs: the index's manifest descriptor carries the
``io.containerd.image.name`` annotation (the full reference) and
``org.opencontainers.image.ref.name`` (the tag).

Why not Debian bookworm's umoci 0.4.7, buildah 1.28 or skopeo 1.9:

* ``umoci insert``, its one way to add a layer from a directory without unpacking the image,
  writes the layer's tar without the end-of-archive blocks (umoci issue 436, fixed in 2024 by
  pull request 534, after 0.4.7): Python's tarfile, and so ``tests/images/ocitar.py``, rejects
  such a layer ("unexpected end of data", checked with Debian's umoci). ``umoci repack`` needs
  the whole image unpacked as a bundle first (for graphsage: base, mpi and the dgl tree,
  1.2 GB CPU / 5.6 GB GPU).
* umoci takes a layer's owners, modes and mtimes from the files on disk (checked: ``insert``
  keeps the staged files' and directories' uids and mtimes). Ours are set per path without
  touching the staged files (root's code and 65532's ``/dgl_workspace`` in one layer, modes
  0644/0755, one mtime): the dgl layer's staged files are hard links into the DGL venv, whose
  own files a chown/chmod/touch would change.
* umoci 0.4.7 gzips every layer (``insert`` and ``repack`` have no compression option); the
  dgl layer is stored uncompressed on purpose (gzip of 1.2-5.6 GB costs minutes on every change).
* buildah builds in working containers kept in containers-storage (as root under
  ``/var/lib/containers/storage``), where every layer is unpacked besides its blob: as much again
  disk for each version of the dgl layer, outside the builder's cache folder.
* skopeo writes no layer, config or manifest: it copies existing images between transports,
  so at most it could replace :func:`write_layout_tarball`.
* none of them can tell that a layer's inputs (the project's files, the DGL venv's RECORDs,
  the debootstrap options) are unchanged without building it: that cache
  (:mod:`imagebuild.context`) stays whichever tool writes the tars.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
ANNOTATION_CREATED = "org.opencontainers.image.created"

COPY_BUFFER = 1 << 20
GZIP_LEVEL = 6


def canonical_json(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(COPY_BUFFER):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


class _HashingWriter(io.RawIOBase):
    """Counts and hashes what passes through to ``target`` (a binary file or stream)."""

    def __init__(self, target: BinaryIO | io.RawIOBase | gzip.GzipFile) -> None:
        super().__init__()
        self._target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha.update(view)
        self.size += len(view)
        self._target.write(view)
        return len(view)

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


@dataclass(frozen=True)
class Layer:
    """A layer blob: ``digest``/``size`` of the blob, ``diff_id`` of its uncompressed tar."""

    media_type: str
    digest: str
    size: int
    diff_id: str
    uncompressed_size: int
    created_by: str

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Layer:
        return cls(**{k: doc[k] for k in cls.__dataclass_fields__})


class BlobStore:
    """``<root>/sha256/<hex>`` files, written atomically (a temp file renamed into place)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "sha256").mkdir(parents=True, exist_ok=True)

    def path(self, digest: str) -> Path:
        algo, _, hexdigest = digest.partition(":")
        if algo != "sha256" or len(hexdigest) != 64:
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return self.root / "sha256" / hexdigest

    def has(self, digest: str, size: int) -> bool:
        p = self.path(digest)
        return p.is_file() and p.stat().st_size == size

    def put_bytes(self, data: bytes) -> tuple[str, int]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if not self.has(digest, len(data)):
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path(digest))
        return digest, len(data)

    def write_layer(
        self,
        entries: Iterable[tuple[tarfile.TarInfo, Path | bytes | None]],
        *,
        gzip_it: bool,
        created_by: str,
    ) -> Layer:
        """Write a layer tar of ``entries`` (in the order given) as a blob."""
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb", buffering=COPY_BUFFER) as raw:
                outer = _HashingWriter(raw)
                gz: gzip.GzipFile | None = None
                if gzip_it:
                    gz = gzip.GzipFile(
                        filename="", mode="wb", fileobj=outer, mtime=0, compresslevel=GZIP_LEVEL
                    )
                    inner = _HashingWriter(gz)
                else:
                    inner = outer
                write_tar(inner, entries)
                if gz is not None:
                    gz.close()
            digest = outer.digest
            os.replace(tmp, self.path(digest))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return Layer(
            media_type=MEDIA_LAYER_GZIP if gzip_it else MEDIA_LAYER_TAR,
            digest=digest,
            size=outer.size,
            diff_id=inner.digest,
            uncompressed_size=inner.size,
            created_by=created_by,
        )

    def gzip_tar_file(self, tar_path: Path, *, created_by: str) -> Layer:
        """A gzip layer blob of an existing (already deterministic) tar file."""
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb", buffering=COPY_BUFFER) as raw, tar_path.open("rb") as src:
                outer = _HashingWriter(raw)
                gz = gzip.GzipFile(
                    filename="", mode="wb", fileobj=outer, mtime=0, compresslevel=GZIP_LEVEL
                )
                inner = _HashingWriter(gz)
                while chunk := src.read(COPY_BUFFER):
                    inner.write(chunk)
                gz.close()
            os.replace(tmp, self.path(outer.digest))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return Layer(
            MEDIA_LAYER_GZIP, outer.digest, outer.size, inner.digest, inner.size, created_by
        )


# -- layer tars ----------------------------------------------------------------------------------


def write_tar(
    out: io.RawIOBase | BinaryIO, entries: Iterable[tuple[tarfile.TarInfo, Path | bytes | None]]
) -> None:
    """A PAX tar stream of ``entries``: ``(info, content)`` with a file path or bytes for
    regular files and None for everything else."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, bufsize=COPY_BUFFER) as t:
        for info, content in entries:
            if info.isreg():
                if isinstance(content, bytes):
                    t.addfile(info, io.BytesIO(content))
                elif content is not None:
                    with content.open("rb") as f:
                        t.addfile(info, f)
                else:
                    raise ValueError(f"{info.name}: a regular file needs content")
            else:
                t.addfile(info)


def tar_info(
    name: str,
    *,
    kind: bytes = tarfile.REGTYPE,
    mode: int = 0o644,
    size: int = 0,
    mtime: int = 0,
    uid: int = 0,
    gid: int = 0,
    linkname: str = "",
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size if kind == tarfile.REGTYPE else 0
    info.mtime = mtime
    info.uid, info.gid = uid, gid
    info.uname = info.gname = ""
    info.linkname = linkname
    return info


def parent_dirs(names: Iterable[str], *, mtime: int) -> list[tarfile.TarInfo]:
    """Directory entries (root, 0755) for every parent of ``names`` not listed itself."""
    listed = set(names)
    parents: set[str] = set()
    for name in listed:
        parts = name.rstrip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parents.add("/".join(parts[:i]))
    return [
        tar_info(p, kind=tarfile.DIRTYPE, mode=0o755, mtime=mtime) for p in sorted(parents - listed)
    ]


Owner = Callable[[str], tuple[int, int]]


def _root_owner(_name: str) -> tuple[int, int]:
    return 0, 0


def tree_entries(
    src: Path,
    prefix: str,
    *,
    mtime: int,
    owner: Owner = _root_owner,
    exclude: Callable[[str], bool] | None = None,
) -> Iterator[tuple[tarfile.TarInfo, Path | None]]:
    """Entries for the tree ``src`` placed at ``prefix`` (no leading slash; "" puts its
    children at the top without an entry for ``src`` itself), sorted, with the given mtime,
    owners from ``owner(name)`` and normalised modes (dirs and executables 0755, other files
    0644). Symlinks are kept; other special files are refused."""
    prefix = prefix.strip("/")
    if prefix:
        yield _entry(src, prefix, mtime, owner)

    def walk(directory: Path, name: str) -> Iterator[tuple[tarfile.TarInfo, Path | None]]:
        for child in sorted(os.listdir(directory)):
            path = directory / child
            child_name = f"{name}/{child}" if name else child
            if exclude is not None and exclude(child_name):
                continue
            entry = _entry(path, child_name, mtime, owner)
            yield entry
            if entry[0].isdir():
                yield from walk(path, child_name)

    yield from walk(src, prefix)


def _entry(path: Path, name: str, mtime: int, owner: Owner) -> tuple[tarfile.TarInfo, Path | None]:
    st = path.lstat()
    uid, gid = owner(name)
    if stat.S_ISDIR(st.st_mode):
        return tar_info(name, kind=tarfile.DIRTYPE, mode=0o755, mtime=mtime, uid=uid, gid=gid), None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return tar_info(
            name, kind=tarfile.SYMTYPE, mode=0o777, mtime=mtime, uid=uid, gid=gid, linkname=target
        ), None
    if stat.S_ISREG(st.st_mode):
        mode = 0o755 if st.st_mode & 0o111 else 0o644
        return tar_info(name, mode=mode, size=st.st_size, mtime=mtime, uid=uid, gid=gid), path
    raise ValueError(f"{path}: not a file, directory or symlink")


def rootfs_entries(root: Path) -> Iterator[tuple[tarfile.TarInfo, Path | None]]:
    """Entries for a whole root filesystem, keeping its modes, numeric owners and mtimes (names
    dropped), hard links as links, device nodes and sockets left out; in sorted depth-first
    order (a directory, then its children by name)."""
    seen: dict[tuple[int, int], str] = {}

    def walk(directory: Path, name: str) -> Iterator[tuple[tarfile.TarInfo, Path | None]]:
        for child in sorted(os.listdir(directory)):
            path = directory / child
            child_name = f"{name}/{child}" if name else child
            st = path.lstat()
            common: dict[str, Any] = {
                "mode": stat.S_IMODE(st.st_mode),
                "mtime": int(st.st_mtime),
                "uid": st.st_uid,
                "gid": st.st_gid,
            }
            if stat.S_ISDIR(st.st_mode):
                yield tar_info(child_name, kind=tarfile.DIRTYPE, **common), None
                yield from walk(path, child_name)
            elif stat.S_ISLNK(st.st_mode):
                link = os.readlink(path)
                yield tar_info(child_name, kind=tarfile.SYMTYPE, linkname=link, **common), None
            elif stat.S_ISREG(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in seen:
                    link = seen[key]
                    yield tar_info(child_name, kind=tarfile.LNKTYPE, linkname=link, **common), None
                    continue
                seen[key] = child_name
                yield tar_info(child_name, size=st.st_size, **common), path
            # character/block devices, fifos and sockets have no place in an image layer

    yield from walk(root, "")


# -- images ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    """An assembled image: its manifest (and config) stored as blobs."""

    name: str  # full reference, e.g. docker.io/dgloperator/dgl-operator:0.2.0
    tag: str
    manifest_digest: str
    manifest_size: int
    config_digest: str
    layers: tuple[Layer, ...]
    created: str
    platform: tuple[str, str]  # (os, architecture)

    def blob_digests(self) -> list[str]:
        return [self.manifest_digest, self.config_digest] + [layer.digest for layer in self.layers]

    def index(self) -> dict[str, Any]:
        os_name, arch = self.platform
        return {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": self.manifest_digest,
                    "size": self.manifest_size,
                    "platform": {"os": os_name, "architecture": arch},
                    "annotations": {
                        ANNOTATION_CONTAINERD_NAME: self.name,
                        ANNOTATION_REF_NAME: self.tag,
                    },
                }
            ],
        }


def assemble_image(
    store: BlobStore,
    *,
    name: str,
    tag: str,
    layers: Iterable[Layer],
    config: Mapping[str, Any],
    created: str,
    platform: tuple[str, str] = ("linux", "amd64"),
    annotations: Mapping[str, str] | None = None,
) -> Image:
    """Write the image config and manifest blobs for ``layers`` and ``config`` (the OCI
    ``config`` object: Entrypoint, Cmd, Env, User, WorkingDir, Labels, ...)."""
    layers = tuple(layers)
    os_name, arch = platform
    config_doc = {
        "created": created,
        "architecture": arch,
        "os": os_name,
        "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": created, "created_by": layer.created_by} for layer in layers],
    }
    config_digest, config_size = store.put_bytes(canonical_json(config_doc))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": config_size},
        "layers": [layer.descriptor() for layer in layers],
        "annotations": {ANNOTATION_CREATED: created, **(annotations or {})},
    }
    manifest_digest, manifest_size = store.put_bytes(canonical_json(manifest))
    return Image(
        name, tag, manifest_digest, manifest_size, config_digest, layers, created, platform
    )


def write_layout_tarball(store: BlobStore, image: Image, out: Path, *, mtime: int) -> int:
    """Write the OCI image-layout tarball of ``image`` to ``out`` atomically; returns its size.

    ``oci-layout`` and ``index.json`` come first, so :func:`tarball_manifest_digest` reads them
    without scanning the blobs."""
    out.parent.mkdir(parents=True, exist_ok=True)
    layout = canonical_json({"imageLayoutVersion": "1.0.0"})
    index = canonical_json(image.index())
    entries: list[tuple[tarfile.TarInfo, Path | bytes | None]] = [
        (tar_info("oci-layout", size=len(layout), mtime=mtime), layout),
        (tar_info("index.json", size=len(index), mtime=mtime), index),
        (tar_info("blobs", kind=tarfile.DIRTYPE, mode=0o755, mtime=mtime), None),
        (tar_info("blobs/sha256", kind=tarfile.DIRTYPE, mode=0o755, mtime=mtime), None),
    ]
    done: set[str] = set()
    for digest in image.blob_digests():
        if digest in done:
            continue
        done.add(digest)
        path = store.path(digest)
        entries.append(
            (
                tar_info(
                    "blobs/sha256/" + digest.split(":", 1)[1], size=path.stat().st_size, mtime=mtime
                ),
                path,
            )
        )
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    try:
        with os.fdopen(fd, "wb", buffering=COPY_BUFFER) as f:
            write_tar(f, entries)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out.stat().st_size


def tarball_manifest_digest(path: Path) -> str | None:
    """The manifest digest in an image-layout tarball's index.json (None if unreadable)."""
    try:
        with tarfile.open(path, "r:") as t:
            for _ in range(4):
                member = t.next()
                if member is None:
                    return None
                if member.name == "index.json":
                    f = t.extractfile(member)
                    if f is None:
                        return None
                    doc = json.load(f)
                    return str(doc["manifests"][0]["digest"])
    except (OSError, tarfile.TarError, ValueError, KeyError, IndexError):
        return None
    return None
