"""Structure of the OCI image-layout tarballs hack/build_images.py writes: JSON documents,
digests and sizes, layer contents and metadata, image configs, determinism and caching."""

from __future__ import annotations

import configparser
import filecmp
import hashlib
import json
import re
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.images.helpers import ALL_IMAGES, SMALL_IMAGES, LayerScans, report, run_build
from tests.images.ocitar import LAYER_GZIP, LAYER_TAR, LayerScan, OciTarball

REGISTRY = "docker.io/dgloperator"
REPO = Path(__file__).resolve().parents[2]
NONROOT = 65532
EPOCH = 1704067200
CREATED = "2024-01-01T00:00:00Z"
SCRIPTS = ("dgl-operator", "dglrun", "kubectl-download", "watcher-loop")
PARAMS = [
    pytest.param(name, marks=[pytest.mark.slow] if name == "graphsage" else [])
    for name in ALL_IMAGES
]

EXPECTED: dict[str, dict[str, Any]] = {
    "operator": {
        "repository": "dgl-operator",
        "Entrypoint": ["/usr/local/bin/dgl-operator"],
        "Cmd": None,
        "WorkingDir": "/",
        "layers": 2,
        "pythonpath": "/opt/dgl-operator/site-packages",
    },
    "watcher-loop": {
        "repository": "watcher-loop",
        "Entrypoint": ["/usr/local/bin/watcher-loop"],
        "Cmd": None,
        "WorkingDir": "/",
        "layers": 2,
        "pythonpath": "/opt/dgl-operator/site-packages",
    },
    "kubectl-download": {
        "repository": "kubectl-download",
        "Entrypoint": ["/usr/local/bin/kubectl-download"],
        "Cmd": None,
        "WorkingDir": "/",
        "layers": 3,
        "pythonpath": "/opt/dgl-operator/site-packages",
    },
    "graphsage": {
        "repository": "graphsage",
        "Entrypoint": None,
        "Cmd": ["dglrun", "--help"],
        "WorkingDir": "/dgl_workspace",
        "layers": 5,
        "pythonpath": "/opt/dgl-operator/site-packages:/opt/dgl/site-packages",
    },
    "pause": {
        "repository": "pause",
        "Entrypoint": ["/pause"],
        "Cmd": None,
        "WorkingDir": "/",
        "layers": 1,
        "pythonpath": None,
    },
}


def scans_of(
    name: str, tarballs: dict[str, OciTarball], layer_scans: LayerScans
) -> list[LayerScan]:
    t = tarballs[name]
    layers = t.manifest["layers"]
    python = name != "pause"
    return [layer_scans.get(t, desc, base=python and i == 0) for i, desc in enumerate(layers)]


def merged(scans: list[LayerScan]) -> dict[str, tarfile.TarInfo]:
    """The image's file system as the union of its layers (later layers win)."""
    out: dict[str, tarfile.TarInfo] = {}
    for scan in scans:
        for m in scan.members:
            out[m.name] = m
    return out


def file_of(scans: list[LayerScan], name: str) -> bytes:
    for scan in reversed(scans):
        if name in scan.files:
            return scan.files[name]
    raise KeyError(name)


# -- layout ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PARAMS)
def test_index_and_layout(
    name: str, built: dict[str, Any], tarballs: dict[str, OciTarball]
) -> None:
    t = tarballs[name]
    names = [m.name for m in t.members]
    assert names[:2] == ["oci-layout", "index.json"]
    assert json.loads(t.read("oci-layout")) == {"imageLayoutVersion": "1.0.0"}
    index = t.index
    assert index["schemaVersion"] == 2
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert len(index["manifests"]) == 1
    desc = index["manifests"][0]
    assert desc["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert desc["platform"] == {"os": "linux", "architecture": "amd64"}
    reference = f"{REGISTRY}/{EXPECTED[name]['repository']}:0.2.0"
    assert desc["annotations"] == {
        "io.containerd.image.name": reference,
        "org.opencontainers.image.ref.name": "0.2.0",
    }
    assert built[name]["reference"] == reference
    assert built[name]["manifest_digest"] == desc["digest"]
    # every member is a directory of the layout or a blob, with fixed metadata
    for m in t.members:
        assert m.uid == m.gid == 0 and m.uname == m.gname == ""
        assert m.mtime == EPOCH
        if m.isdir():
            assert m.name in ("blobs", "blobs/sha256")
        else:
            assert m.isreg()
            assert m.name in ("oci-layout", "index.json") or re.fullmatch(
                r"blobs/sha256/[0-9a-f]{64}", m.name
            ), m.name
    # exactly the blobs the manifest references
    manifest = t.manifest
    referenced = {desc["digest"], manifest["config"]["digest"]}
    referenced |= {layer["digest"] for layer in manifest["layers"]}
    stored = {"sha256:" + n.rsplit("/", 1)[1] for n in names if n.startswith("blobs/sha256/")}
    assert stored == referenced


@pytest.mark.parametrize("name", PARAMS)
def test_digests_and_sizes_match_blobs(
    name: str, tarballs: dict[str, OciTarball], layer_scans: LayerScans
) -> None:
    t = tarballs[name]
    desc = t.manifest_descriptor
    manifest_bytes = t.read(t.blob_name(desc["digest"]))
    assert len(manifest_bytes) == desc["size"]
    assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == desc["digest"]
    manifest = json.loads(manifest_bytes)
    assert manifest["schemaVersion"] == 2
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    config_desc = manifest["config"]
    assert config_desc["mediaType"] == "application/vnd.oci.image.config.v1+json"
    config_bytes = t.read(t.blob_name(config_desc["digest"]))
    assert len(config_bytes) == config_desc["size"]
    assert "sha256:" + hashlib.sha256(config_bytes).hexdigest() == config_desc["digest"]
    config = json.loads(config_bytes)
    scans = scans_of(name, tarballs, layer_scans)
    assert len(manifest["layers"]) == EXPECTED[name]["layers"]
    diff_ids = []
    for layer, scan in zip(manifest["layers"], scans, strict=True):
        assert layer["mediaType"] in (LAYER_GZIP, LAYER_TAR)
        assert scan.digest == layer["digest"]
        assert scan.size == layer["size"] == t.blob_size(layer["digest"])
        if layer["mediaType"] == LAYER_TAR:
            assert scan.diff_id == scan.digest
        diff_ids.append(scan.diff_id)
    assert config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}


# -- config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_IMAGES)
def test_config(name: str, tarballs: dict[str, OciTarball]) -> None:
    expected = EXPECTED[name]
    doc = tarballs[name].config
    assert doc["os"] == "linux" and doc["architecture"] == "amd64"
    assert doc["created"] == CREATED
    assert len(doc["history"]) == expected["layers"]
    assert all(h["created_by"] for h in doc["history"])
    config = doc["config"]
    assert config["User"] == f"{NONROOT}:{NONROOT}"
    assert config.get("Entrypoint") == expected["Entrypoint"]
    assert config.get("Cmd") == expected["Cmd"]
    assert config["WorkingDir"] == expected["WorkingDir"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert "/usr/local/bin" in env["PATH"].split(":")
    assert env.get("PYTHONPATH") == expected["pythonpath"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == "0.2.0"
    assert labels["org.opencontainers.image.created"] == CREATED
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.title"]
    if name == "operator":
        assert set(config["ExposedPorts"]) == {"8080/tcp", "8081/tcp"}
    if name == "kubectl-download":
        assert env["KUBECTL_SOURCE"] == "/usr/local/bin/kubectl"
        assert env["TARGET_DIR"] == "/opt/kube"
    if name == "graphsage":
        assert env["OUTDATED_IGNORE"] == "1" and env["DGLBACKEND"] == "pytorch"


# -- layer contents --------------------------------------------------------------------------------


# layers made by debootstrap, per image (the others are ours, normalised)
DEBIAN_LAYERS = {"graphsage": (0, 1)}


def _component_order(names: list[str]) -> bool:
    return names == sorted(names, key=lambda n: n.split("/"))


@pytest.mark.parametrize("name", PARAMS)
def test_layers_are_normalised(
    name: str, tarballs: dict[str, OciTarball], layer_scans: LayerScans
) -> None:
    """Sorted entries; our layers: fixed mtimes, owners 0 or 65532, no owner names, normal
    modes, nothing that names the build host."""
    scans = scans_of(name, tarballs, layer_scans)
    for i, scan in enumerate(scans):
        assert _component_order(scan.names()), f"layer {i} is not sorted"
        assert all(m.uname == "" and m.gname == "" for m in scan.members)
        assert not [m.name for m in scan.members if m.ischr() or m.isblk() or m.isfifo()]
        if name != "pause" and i in DEBIAN_LAYERS.get(name, (0,)):
            # Debian's own files (the base; graphsage's Open MPI + PT-Scotch layer) keep their
            # modes, owners and mtimes; nothing of the build host gets in
            assert scan.marker_hits == {}, f"host paths in layer {i}: {scan.marker_hits}"
            continue
        for m in scan.members:
            assert m.mtime == EPOCH, m.name
            assert (m.uid, m.gid) in ((0, 0), (NONROOT, NONROOT)), m.name
            if m.isdir():
                assert m.mode == 0o755, m.name
            elif m.isreg():
                assert m.mode in (0o644, 0o755), m.name
            else:
                assert m.issym(), m.name
        assert scan.marker_hits == {}, f"host paths in layer {i}: {scan.marker_hits}"


@pytest.mark.parametrize("name", ["operator", "watcher-loop", "kubectl-download"])
def test_base_layer(name: str, tarballs: dict[str, OciTarball], layer_scans: LayerScans) -> None:
    """(graphsage has the same base layer: see the next test)"""
    base = scans_of(name, tarballs, layer_scans)[0]
    names = set(base.names())
    assert {
        "usr/bin/python3",
        "usr/bin/python3.11",
        "usr/lib/python3.11/os.py",
        "etc/ssl/certs/ca-certificates.crt",
        "usr/bin/sleep",
        "bin",
        "tmp",
    } <= names
    assert base.member("usr/bin/python3").linkname == "python3.11"
    passwd = base.files["etc/passwd"].decode()
    assert "nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin" in passwd
    assert "nonroot:x:65532:" in base.files["etc/group"].decode()
    home = base.member("home/nonroot")
    assert (home.uid, home.gid) == (NONROOT, NONROOT)
    # cleaned: no apt lists or caches, docs (but copyright files), man pages, locales, devices,
    # host files
    for prefix in (
        "var/lib/apt/lists/",
        "usr/share/man/",
        "usr/share/locale/",
        "dev/",
        "var/cache/apt/archives/",
    ):
        leftovers = [
            n
            for n in names
            if n.startswith(prefix)
            and not base.member(n).isdir()
            and not n.endswith("locale.alias")
        ]
        assert not leftovers, f"{prefix}: {leftovers[:5]}"
    docs = [n for n in names if n.startswith("usr/share/doc/") and not base.member(n).isdir()]
    assert docs and all(n.endswith("/copyright") or base.member(n).issym() for n in docs)
    for host_file in ("etc/hostname", "etc/resolv.conf", "etc/machine-id"):
        assert host_file not in names


def test_all_python_images_share_the_base_layer(tarballs: dict[str, OciTarball]) -> None:
    bases = {tarballs[n].manifest["layers"][0]["digest"] for n in ALL_IMAGES if n != "pause"}
    assert len(bases) == 1
    apps = {
        tarballs[n].manifest["layers"][1]["digest"]
        for n in ("operator", "watcher-loop", "kubectl-download")
    }
    assert len(apps) == 1


@pytest.mark.parametrize("name", ["operator", "watcher-loop", "kubectl-download"])
def test_app_layer(name: str, tarballs: dict[str, OciTarball], layer_scans: LayerScans) -> None:
    scans = scans_of(name, tarballs, layer_scans)
    app = scans[1]
    names = set(app.names())
    site = "opt/dgl-operator/site-packages"
    for package in project_packages():
        assert f"{site}/{package}/__init__.py" in names, package
    for module in (
        "controller/main.py",
        "launcher/cli.py",
        "launcher/workers/remote.py",
        "watcher_loop/__main__.py",
        "kubectl_download/install.py",
        "kubernetes/__init__.py",
        "structlog/__init__.py",
        "prometheus_client/__init__.py",
        "yaml/__init__.py",
    ):
        assert f"{site}/{module}" in names, module
    # unchecked-hash pycs (flags == 1) next to the sources
    pyc = app.files[f"{site}/launcher/__pycache__/cli.cpython-311.pyc"]
    assert int.from_bytes(pyc[4:8], "little") == 0b01
    assert not [n for n in names if n.startswith(f"{site}/bin/")]
    assert not [n for n in names if n.endswith("direct_url.json")]
    for script in SCRIPTS:
        info = app.member(f"usr/local/bin/{script}")
        assert info.mode == 0o755
        text = app.files[f"usr/local/bin/{script}"].decode()
        assert text.startswith("#!/usr/bin/python3\n")
    assert "from launcher.cli import main" in app.files["usr/local/bin/dglrun"].decode()


def test_every_installed_dependency_is_pinned(
    tarballs: dict[str, OciTarball], layer_scans: LayerScans
) -> None:
    """Each distribution in the app layer has its exact version in setup.cfg or
    images/app-constraints.txt: a rebuild after PyPI moves on gives the same bytes."""

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "_", name.lower())

    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    lines = parser["options"]["install_requires"].splitlines()
    lines += (REPO / "images" / "app-constraints.txt").read_text().splitlines()
    pins = {}
    for line in lines:
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[canonical(name)] = version
    found = re.findall(
        r"^opt/dgl-operator/site-packages/([^/]+)-([^-/]+)\.dist-info/METADATA$",
        "\n".join(scans_of("operator", tarballs, layer_scans)[1].names()),
        re.M,
    )
    installed = {canonical(n): v for n, v in found if n != "dgl_operator"}
    assert installed, "no dist-info in the operator's app layer"
    unpinned = {n: v for n, v in installed.items() if pins.get(n) != v}
    assert not unpinned, f"pin these in images/app-constraints.txt: {unpinned}"


def test_kubectl_layer(tarballs: dict[str, OciTarball], layer_scans: LayerScans) -> None:
    scan = scans_of("kubectl-download", tarballs, layer_scans)[2]
    assert scan.names() == ["usr", "usr/local", "usr/local/bin", "usr/local/bin/kubectl"]
    kubectl = scan.member("usr/local/bin/kubectl")
    assert kubectl.mode == 0o755 and kubectl.size > 10_000_000
    assert scan.heads["usr/local/bin/kubectl"][:4] == b"\x7fELF"


def test_pause_layer(tarballs: dict[str, OciTarball], layer_scans: LayerScans) -> None:
    scan = scans_of("pause", tarballs, layer_scans)[0]
    assert scan.names() == ["pause"]
    assert scan.member("pause").mode == 0o755
    assert scan.heads["pause"][:4] == b"\x7fELF"


@pytest.mark.slow
def test_graphsage_layers(tarballs: dict[str, OciTarball], layer_scans: LayerScans) -> None:
    scans = scans_of("graphsage", tarballs, layer_scans)
    _base, mpi, dgl, app, examples = scans
    assert tarballs["graphsage"].manifest["layers"][2]["mediaType"] == LAYER_TAR
    # Open MPI and PT-Scotch's ParMETIS API, and only what the shared base lacks
    mpi_names = set(mpi.names())
    for path in (
        "usr/bin/orted",
        "usr/lib/x86_64-linux-gnu/libmpi.so.40",
        "usr/lib/x86_64-linux-gnu/scotch-int64/libptscotchparmetisv3-7.0.so",
        "var/lib/dpkg/status",
    ):
        assert path in mpi_names, path
    assert any(n.startswith("usr/bin/mpirun") for n in mpi_names)
    assert "usr/bin/python3.11" not in mpi_names and "usr/bin/sleep" not in mpi_names
    names = set(dgl.names())
    site = "opt/dgl/site-packages"
    for module in (
        "dgl/__init__.py",
        "torch/__init__.py",
        "ogb/__init__.py",
        "torchdata/__init__.py",
        "mpi4py/__init__.py",
        "dgl/__pycache__/__init__.cpython-311.pyc",
    ):
        assert f"{site}/{module}" in names, module
    assert not [n for n in names if n.startswith((f"{site}/pip/", f"{site}/bin/"))]
    # the CPU variant: no triton, no CUDA math libraries; small stubs where kept torch libraries
    # need libtorch_cuda.so and libcudnn.so.8; cudart, CUPTI and NVTX kept (torch.cuda's
    # device count, the profiler)
    for gone in (
        "triton/__init__.py",
        "nvidia/cublas/lib/libcublas.so.12",
        "nvidia/nccl/lib/libnccl.so.2",
        "torch/lib/libtorch_cuda_linalg.so",
    ):
        assert f"{site}/{gone}" not in names, gone
    assert not [n for n in names if re.match(rf"{site}/(triton|nvidia_cudnn)[^/]*\.dist-info/", n)]
    for stub in ("torch/lib/libtorch_cuda.so", "nvidia/cudnn/lib/libcudnn.so.8"):
        assert dgl.member(f"{site}/{stub}").size < 100_000, stub
    for kept in (
        "nvidia/cuda_runtime/lib/libcudart.so.12",
        "nvidia/cuda_cupti/lib/libcupti.so.12",
        "torch/lib/libtorch_cpu.so",
        "torch/lib/libc10_cuda.so",
    ):
        assert f"{site}/{kept}" in names, kept
    # the project alone, with only the dglrun and dgl-chunk-graph wrappers
    app_names = set(app.names())
    for package in project_packages():
        assert f"opt/dgl-operator/site-packages/{package}/__init__.py" in app_names, package
    assert "opt/dgl-operator/site-packages/launcher/workers/remote.py" in app_names
    assert not [n for n in app_names if n.startswith("opt/dgl-operator/site-packages/kubernetes")]
    assert sorted(n for n in app_names if n.startswith("usr/local/bin/")) == [
        "usr/local/bin/dgl-chunk-graph",
        "usr/local/bin/dglrun",
    ]
    assert "opt/dgl-operator/site-packages/distpart/pipeline.py" in app_names
    workspace = examples.member("dgl_workspace")
    assert (workspace.uid, workspace.gid) == (NONROOT, NONROOT)
    for script in ("train_dist.py", "load_and_partition_graph.py", "common.py"):
        info = examples.member(f"dgl_workspace/code/{script}")
        assert (info.uid, info.mode) == (0, 0o644)
    # the ParMETIS modes' input: the same graph in DGL's chunked format
    chunked = json.loads(examples.files["dgl_workspace/chunked/metadata.json"])
    assert chunked["graph_name"] == "graphsage" and len(chunked["num_nodes_per_chunk"][0]) == 4
    assert "dgl_workspace/chunked/edges/edges-3.npy" in set(examples.names())
    fs = merged(scans)
    assert "usr/bin/python3" in fs


@pytest.mark.slow
def test_graphsage_is_at_most_1_5_gb(built: dict[str, Any]) -> None:
    """The CPU example image: at most 1.5 GB (10^9 bytes) unpacked, and so as a tarball."""
    item = built["graphsage"]
    report(
        f"graphsage: {item['size'] / 1e9:.2f} GB tarball, "
        f"{item['unpacked_size'] / 1e9:.2f} GB unpacked"
    )
    assert item["unpacked_size"] <= 1_500_000_000
    assert item["size"] <= 1_500_000_000


def project_packages() -> list[str]:
    """Top-level packages setup.cfg installs, read independently of hack/build_images.py."""
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    include = parser["options.packages.find"]["include"].split()
    packages = [name for name in include if "." not in name]
    assert {"controller", "launcher", "podprogram"} <= set(packages)
    return packages


# -- builds ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rebuild_without_cache_is_identical(built: dict[str, Any], tmp_path: Path) -> None:
    """Building again from scratch (pip install, byte-compiling, layer tars, gzip; the cached
    Debian root filesystem re-packed) gives the same digests and byte-identical tarballs."""
    start = time.monotonic()
    summary, _ = run_build(["--no-cache", "--only", ",".join(SMALL_IMAGES), "--out", str(tmp_path)])
    report(f"rebuild without cache ({', '.join(SMALL_IMAGES)}): {time.monotonic() - start:.1f}s")
    for item in summary:
        first = built[item["image"]]
        assert item["manifest_digest"] == first["manifest_digest"], item["image"]
        assert item["built"] is True
        assert filecmp.cmp(item["tarball"], first["tarball"], shallow=False), item["image"]


def test_warm_build_reuses_everything(built: dict[str, Any]) -> None:
    start = time.monotonic()
    summary, stderr = run_build([])
    seconds = time.monotonic() - start
    report(f"warm rebuild (all images): {seconds:.1f}s")
    for item in summary:
        assert item["built"] is False, item["image"]
        assert item["manifest_digest"] == built[item["image"]]["manifest_digest"]
    assert "layer base: reused" in stderr
    assert seconds < 60
