#!/usr/bin/env python3
"""Build the project's images without Docker, as OCI image-layout tarballs.

    python hack/build_images.py [--out DIR] [--only operator,watcher-loop,...] [--tag 0.2.0]

Builds the images that ``images/Dockerfile`` describes (same layout, user, entrypoints, env and
labels), each as a tarball that ``ctr -n k8s.io images import <tarball>`` accepts:

=================  ========================================  =================================
image              layers                                    runs
=================  ========================================  =================================
operator           base, app                                 ``dgl-operator``
watcher-loop       base, app                                 ``watcher-loop``
kubectl-download   base, app, kubectl                        ``kubectl-download``
graphsage          base, mpi, dgl, app-dglrun..., examples   ``dglrun`` (WORKDIR /dgl_workspace)
pause              pause                                     ``/pause`` (a sandbox image)
=================  ========================================  =================================

* base: Debian bookworm from ``debootstrap --variant=minbase`` plus python3 (3.11) and
  ca-certificates, cleaned (apt lists and caches, docs but copyright files, man pages, locales,
  logs, host files), with the user ``nonroot`` (65532). Needs root (debootstrap chroots).
* app: ``pip install --target /opt/dgl-operator/site-packages`` of a wheel of this checkout and
  its runtime dependencies, with this interpreter's pip (Python 3.11, the base's ABI), no
  chroot; byte-compiled with unchecked-hash pycs; console-script wrappers in /usr/local/bin.
  app-dglrun is the project alone (``--no-deps``: dglrun needs the standard library only).
* mpi: Open MPI (``openmpi-bin``) and PT-Scotch's ParMETIS API (``libptscotch-7.0``) for the
  ParMETIS modes: a second debootstrap with these packages, minus every file the base already
  has byte for byte (so the base stays shared by all images).
* dgl: the DGL environment of requirements-dgl.txt at /opt/dgl/site-packages, hard-linked from
  the DGL venv that ``make dgl-venv`` built (or, with ``--dgl-source pip``, installed with pip),
  uncompressed (~5 GB with torch's CUDA wheels: gzip would cost minutes on every change).
* kubectl: the kubectl ``hack/k8s-binaries.sh kubectl`` builds, at /usr/local/bin/kubectl.
* examples: examples/graphsage/*.py at /dgl_workspace/code, the synthetic dataset
  (make_dataset.py, seed 0) at /dgl_workspace/raw_data (the workspace owned by 65532), and
  the same graph in DGL's chunked format (``dgl-chunk-graph``, 4 chunks) at
  /dgl_workspace/chunked, the ParMETIS modes' input.
* pause: a static C program (gcc -static) that sleeps until SIGTERM/SIGINT and reaps children.

Layers are deterministic (sorted entries, fixed mtimes, uid/gid 0 or 65532, no owner names,
normalised modes, gzip without timestamps) and cached under ``~/.cache/dgl-operator/images``
by a hash of their inputs; an image whose tarball already holds the same manifest is reused.
Prints what was built or reused with times and sizes (stderr) and the tarball paths (stdout).
"""

from __future__ import annotations

import argparse
import compileall
import configparser
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import platform
import py_compile
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oci

REPO = Path(__file__).resolve().parents[1]
BUILDER_VERSION = "2"  # bump to rebuild every cached layer


def setup_packages(setup_cfg: Path = REPO / "setup.cfg") -> tuple[str, ...]:
    """Top-level packages setup.cfg installs: the one list the images copy."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    names = parser["options.packages.find"]["include"].split()
    return tuple(n for n in names if n and "." not in n and "*" not in n)


PACKAGES = setup_packages()
PROJECT_FILES = ("setup.cfg", "pyproject.toml", "README.md")
SUITE = "bookworm"
VARIANT = "minbase"
BASE_PACKAGES = ("python3", "ca-certificates")
# the graphsage image: Open MPI and PT-Scotch's ParMETIS API (the ParMETIS modes)
MPI_PACKAGES = ("openmpi-bin", "libptscotch-7.0")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_CLEANUP_VERSION = "2"  # bump when clean_rootfs changes
NONROOT_UID = 65532
NONROOT_NAME = "nonroot"
APP_SITE = "opt/dgl-operator/site-packages"
DGL_SITE = "opt/dgl/site-packages"
WORKSPACE = "dgl_workspace"
DEFAULT_EPOCH = 1704067200  # 2024-01-01T00:00:00Z: mtime of every file of our own layers
DEFAULT_REGISTRY = "docker.io/dgloperator"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DGL_EXCLUDE_TOP = ("pip",)
CHUNKS = 4  # chunks of the example's chunked graph (/dgl_workspace/chunked)  # venv tooling, not part of requirements-dgl.txt

PAUSE_C = r"""
/* pause: PID 1 of a pod sandbox. Sleeps until SIGTERM/SIGINT (exit 0), reaps children. */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = reap;
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    for (;;) pause();
}
"""
PAUSE_CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Werror")


class BuildError(Exception):
    """A build step failed; the message says which and why."""


def log(message: str) -> None:
    print(f"build_images: {message}", file=sys.stderr, flush=True)


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def run(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    log_file: Path | None = None,
    cwd: Path | None = None,
) -> str:
    """Run ``cmd``; its output goes to ``log_file`` (or is returned). Raises BuildError."""
    if log_file is not None:
        with log_file.open("wb") as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        if proc.returncode != 0:
            tail = log_file.read_text(errors="replace").splitlines()[-25:]
            raise BuildError(
                f"{cmd[0]} failed with exit code {proc.returncode} (log: {log_file}):\n  "
                + "\n  ".join(tail)
            )
        return ""
    proc2 = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc2.returncode != 0:
        raise BuildError(
            f"{' '.join(cmd[:3])} ... failed with exit code {proc2.returncode}:\n"
            f"{proc2.stdout[-3000:]}{proc2.stderr[-3000:]}"
        )
    return proc2.stdout


def hash_inputs(doc: Any) -> str:
    return hashlib.sha256(oci.canonical_json(doc)).hexdigest()


def file_hash(path: Path) -> str:
    return oci.sha256_file(path).split(":", 1)[1]


def tree_hash(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> str:
    """Hash of the relative paths, modes (executable or not) and contents under ``root``."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if skip(path) or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        h.update(f"{rel}\0{os.access(path, os.X_OK)}\0{file_hash(path)}\n".encode())
    return h.hexdigest()


def _pycache(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo")


def compile_tree(site: Path, image_path: str) -> None:
    """Byte-compile ``site`` as it will sit at ``image_path``: unchecked-hash pycs (valid
    whatever the files' mtimes) that name the in-image paths, not the staging directory."""
    compileall.compile_dir(
        str(site),
        ddir=image_path,
        quiet=2,  # like pip: files that do not compile (py2 leftovers, templates) are skipped
        workers=os.cpu_count() or 1,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def safe_rmtree(path: Path) -> None:
    """rmtree that first unmounts whatever is still mounted below ``path`` (a debootstrap that
    failed half-way can leave the target's /proc mounted)."""
    if not path.exists():
        return
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        mounted = [line.split()[1] for line in f]
    inside = [m for m in mounted if m == real or m.startswith(real + "/")]
    for mount in sorted(inside, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    shutil.rmtree(path)


# -- context and cache ------------------------------------------------------------------------


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
        if prune:  # drop older layers of this kind (the DGL layer is ~5 GB)
            for other in (self.cache / "layers").glob(f"{kind}-*.json"):
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


# -- base ---------------------------------------------------------------------------------------


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


def _base_doc(ctx: Context) -> dict[str, Any]:
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


def _base_key(ctx: Context) -> str:
    return hash_inputs(_base_doc(ctx))


def base_layer(ctx: Context) -> oci.Layer:
    key_doc = _base_doc(ctx)
    rootfs_key = _base_key(ctx)
    rootfs_tar = ctx.cache / "base" / f"rootfs-{SUITE}-{ctx.arch}-{rootfs_key[:16]}.tar"

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
        return _fresh(ctx, "base", key_doc, make)
    return ctx.layer("base", key_doc, make)


def _fresh(
    ctx: Context, kind: str, key_doc: dict[str, Any], make: Callable[[], oci.Layer]
) -> oci.Layer:
    saved = ctx.no_cache
    ctx.no_cache = True
    try:
        return ctx.layer(kind, key_doc, make)
    finally:
        ctx.no_cache = saved


def find_tool(name: str) -> str:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError(f"{name} not found (hack/tools.sh {name} installs it)")


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


# -- mpi: Open MPI and PT-Scotch on top of the base ---------------------------------------------


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
            data = t.extractfile(member).read() if member.isreg() else None  # type: ignore[union-attr]
            out[member.name] = _signature(member, data)
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
                    info.name, size=path.stat().st_size, mode=info.mode, mtime=info.mtime,
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
    base_tar = ctx.cache / "base" / f"rootfs-{SUITE}-{ctx.arch}-{_base_key(ctx)[:16]}.tar"
    key_doc = {
        "kind": "mpi",
        "base": _base_key(ctx),
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


# -- application layers --------------------------------------------------------------------------


def project_hash() -> str:
    h = hashlib.sha256()
    for name in PROJECT_FILES:
        h.update(f"{name}\0{file_hash(REPO / name)}\n".encode())
    for package in PACKAGES:
        h.update(f"{package}\0{tree_hash(REPO / package, skip=_pycache)}\n".encode())
    return h.hexdigest()


def copy_project(dest: Path) -> None:
    dest.mkdir(parents=True)
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, dest / name)
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def build_wheel(work: Path) -> Path:
    src = work / "src"
    copy_project(src)
    wheels = work / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels)]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        cmd.append("--no-build-isolation")
    run([*cmd, str(src)], env=pip_env())
    found = sorted(wheels.glob("dgl_operator-*.whl"))
    if len(found) != 1:
        raise BuildError(f"pip wheel produced {found}, expected one dgl_operator wheel")
    return found[0]


def tidy_site(site: Path) -> None:
    """Drop what pip --target leaves that names the build host: scripts (host shebangs; our
    wrappers replace them) and direct_url.json (the wheel's temporary path)."""
    shutil.rmtree(site / "bin", ignore_errors=True)
    for direct in site.glob("*.dist-info/direct_url.json"):
        record = direct.parent / "RECORD"
        if record.exists():
            kept = [
                ln
                for ln in record.read_text().splitlines(keepends=True)
                if not ln.startswith(f"{direct.parent.name}/direct_url.json,")
            ]
            record.write_text("".join(kept))
        direct.unlink()
    for cache in sorted(site.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)


def write_wrappers(site: Path, bin_dir: Path, only: set[str] | None) -> list[str]:
    """/usr/local/bin wrappers for the project's console scripts (interpreter /usr/bin/python3;
    imports come from PYTHONPATH, set in the image config)."""
    entry_points = sorted(site.glob("dgl_operator-*.dist-info/entry_points.txt"))
    if len(entry_points) != 1:
        raise BuildError(f"no single dgl_operator dist-info in {site}")
    parser = configparser.ConfigParser()
    parser.read(entry_points[0])
    bin_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for name, target in sorted(parser.items("console_scripts")):
        if only is not None and name not in only:
            continue
        module, _, attr = target.partition(":")
        head = attr.split(".")[0]
        path = bin_dir / name
        path.write_text(
            "#!/usr/bin/python3\n"
            f"# {name}: console script of dgl-operator (written by hack/build_images.py)\n"
            "import sys\n"
            f"from {module.strip()} import {head.strip()}\n"
            "\n"
            'if __name__ == "__main__":\n'
            f"    sys.exit({attr.strip()}())\n"
        )
        path.chmod(0o755)
        names.append(name)
    if only is not None and set(names) != only:
        raise BuildError(f"console scripts {sorted(only - set(names))} not in the project")
    return names


def app_layer(ctx: Context, *, deps: bool, scripts: set[str] | None) -> oci.Layer:
    kind = "app" if deps else "app-" + "-".join(sorted(scripts or ()))
    key_doc = {
        "kind": kind,
        "project": project_hash(),
        "deps": deps,
        "scripts": sorted(scripts) if scripts is not None else None,
        "python": list(sys.version_info[:2]),
    }

    def make() -> oci.Layer:
        with ctx.workdir(kind) as work:
            wheel = build_wheel(work)
            root = work / "root"
            site = root / APP_SITE
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--no-warn-script-location",
                "--only-binary=:all:",
                "--target",
                str(site),
            ]
            if not deps:
                cmd.append("--no-deps")
            run([*cmd, str(wheel)], env=pip_env())
            tidy_site(site)
            compile_tree(site, "/" + APP_SITE)
            names = write_wrappers(site, root / "usr/local/bin", scripts)
            dists = sorted(p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info"))
            log(f"layer {kind}: {', '.join(dists)}")
            what = "dgl-operator and its runtime dependencies" if deps else "dgl-operator (no deps)"
            return ctx.store.write_layer(
                oci.tree_entries(root, "", mtime=ctx.epoch),
                gzip_it=True,
                created_by=f"pip install --target /{APP_SITE} {what}; "
                f"/usr/local/bin/{{{','.join(names)}}}",
            )

    return ctx.layer(kind, key_doc, make)


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


def dgl_layer(ctx: Context) -> oci.Layer:
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
                run(
                    [
                        sys.executable,
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--no-compile",
                        "--prefer-binary",  # littleutils (ogb -> outdated) is an sdist only
                        "--target",
                        str(stage),
                        "-r",
                        str(requirements),
                    ],
                    env=pip_env(),
                )
                tidy_site(stage)
            log(f"layer dgl: staged in {time.monotonic() - start:.0f}s; byte-compiling")
            start = time.monotonic()
            compile_tree(stage, "/" + DGL_SITE)
            log(f"layer dgl: compiled in {time.monotonic() - start:.0f}s; writing the layer")
            return ctx.store.write_layer(
                oci.tree_entries(root, "", mtime=ctx.epoch),
                gzip_it=False,
                created_by=f"DGL environment of requirements-dgl.txt at /{DGL_SITE}",
            )

    return ctx.layer("dgl", key_doc, make, prune=True)


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
    converter = [REPO / "distpart" / "convert.py", REPO / "launcher" / "chunked.py"]
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


def pause_layer(ctx: Context) -> oci.Layer:
    gcc = find_tool("gcc")
    version = run([gcc, "--version"]).splitlines()[0]
    key_doc = {"kind": "pause", "source": PAUSE_C, "cflags": list(PAUSE_CFLAGS), "gcc": version}

    def make() -> oci.Layer:
        with ctx.workdir("pause") as work:
            (work / "pause.c").write_text(PAUSE_C)
            run([gcc, *PAUSE_CFLAGS, "-o", "pause", "pause.c"], cwd=work)
            binary = work / "pause"
            info = oci.tar_info("pause", mode=0o755, size=binary.stat().st_size, mtime=ctx.epoch)
            return ctx.store.write_layer(
                [(info, binary)], gzip_it=True, created_by="pause (static C, gcc -static)"
            )

    return ctx.layer("pause", key_doc, make)


# -- images --------------------------------------------------------------------------------------


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


APP_ENV = (f"PYTHONPATH=/{APP_SITE}", "PYTHONUNBUFFERED=1")

IMAGES: dict[str, ImageSpec] = {
    "operator": ImageSpec(
        repository="dgl-operator",
        title="dgl-operator",
        description="Kubernetes operator for distributed DGL training (DGLJob qihoo.net/v1alpha1)",
        layers=lambda c: [base_layer(c), app_layer(c, deps=True, scripts=None)],
        entrypoint=["/usr/local/bin/dgl-operator"],
        env=APP_ENV,
        ports=("8080/tcp", "8081/tcp"),
    ),
    "watcher-loop": ImageSpec(
        repository="watcher-loop",
        title="dgl-operator watcher-loop",
        description="Init container of DGLJob launcher pods: waits for the listed pods",
        layers=lambda c: [base_layer(c), app_layer(c, deps=True, scripts=None)],
        entrypoint=["/usr/local/bin/watcher-loop"],
        env=APP_ENV,
    ),
    "kubectl-download": ImageSpec(
        repository="kubectl-download",
        title="dgl-operator kubectl-download",
        description="Init container of DGLJob launcher pods: installs a verified kubectl into "
        "/opt/kube (the baked /usr/local/bin/kubectl, or KUBECTL_URL + KUBECTL_SHA256)",
        layers=lambda c: [base_layer(c), app_layer(c, deps=True, scripts=None), kubectl_layer(c)],
        entrypoint=["/usr/local/bin/kubectl-download"],
        env=(*APP_ENV, "TARGET_DIR=/opt/kube", "KUBECTL_SOURCE=/usr/local/bin/kubectl"),
    ),
    "graphsage": ImageSpec(
        repository="graphsage",
        title="dgl-operator GraphSAGE example",
        description="Distributed GraphSAGE with DGL 2.1 / torch 2.2 and dglrun "
        "(examples/graphsage at /dgl_workspace/code)",
        layers=lambda c: [
            base_layer(c),
            mpi_layer(c),
            dgl_layer(c),
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
    ),
    "pause": ImageSpec(
        repository="pause",
        title="dgl-operator pause",
        description="Pod sandbox image: sleeps until SIGTERM",
        layers=lambda c: [pause_layer(c)],
        entrypoint=["/pause"],
        python=False,
    ),
}


def version() -> str:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    return parser.get("metadata", "version")


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
    reference = f"{ctx.registry}/{spec.repository}:{ctx.tag}"
    image = oci.assemble_image(
        ctx.store,
        name=reference,
        tag=ctx.tag,
        layers=layers,
        config=image_config(ctx, spec, created),
        created=created,
        platform=("linux", ctx.arch),
        annotations={
            "org.opencontainers.image.title": spec.title,
            "org.opencontainers.image.version": ctx.tag,
        },
    )
    tarball = ctx.out / f"{spec.repository}-{ctx.tag}.tar"
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
    p.add_argument(
        "--only",
        default=",".join(IMAGES),
        help=f"comma-separated images (default: all of {','.join(IMAGES)})",
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


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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


if __name__ == "__main__":
    sys.exit(main())
