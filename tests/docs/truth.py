"""What the repository has, read from the code itself: its files, its Python modules and what
they define, the Makefile's targets and variables, the flags each program's parsers define,
and the chart's values. Nothing here is a hand-written list of names."""

from __future__ import annotations

import argparse
import ast
import configparser
import functools
import importlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

SKIPPED_DIRS = {
    ".git",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "node_modules",
}
FLAG_WORD = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*)")
HERE = Path(__file__).resolve().parent
# the folders of tests, whose strings hold flags that exist nowhere (a refusal's examples)
TEST_FOLDERS = ("tests", "e2e")
REPO_ROOT = HERE.parents[1]  # (the one whose modules this process imports)
MODULE_ATTRIBUTES = ("__file__", "__doc__", "__name__", "__path__", "__version__")
CHART = Path("charts/dgl-operator")
IMAGES_MODULE = Path("hack/imagebuild/images.py")
# the console scripts (setup.cfg) and where their parsers live
CONSOLE_SCRIPTS_SECTION = "console_scripts"


class Repository:
    """The repository at ``root`` as the documents may name it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    # -- files -------------------------------------------------------------------------------

    @functools.cached_property
    def paths(self) -> frozenset[str]:
        """Every file and folder, relative, folders without a trailing slash."""
        found: set[str] = set()
        for path in _walk(self.root):
            rel = path.relative_to(self.root).as_posix()
            found.add(rel)
        return frozenset(found)

    @functools.cached_property
    def top_level(self) -> frozenset[str]:
        return frozenset(p for p in self.paths if "/" not in p)

    def exists(self, path: str) -> bool:
        return path.strip("/").removeprefix("./") in self.paths

    def ends_with(self, path: str) -> bool:
        """Some file or folder's path ends with ``path`` (`delivery/pull.py`)."""
        tail = "/" + path.strip("/")
        return any(("/" + p).endswith(tail) for p in self.paths)

    # -- Python ------------------------------------------------------------------------------

    @functools.cached_property
    def packages(self) -> frozenset[str]:
        """The top-level folders that hold Python code (importable as `name.sub`)."""
        return frozenset(
            p
            for p in self.top_level
            if (self.root / p).is_dir() and any((self.root / p).glob("**/*.py"))
        )

    @functools.cached_property
    def product_packages(self) -> frozenset[str]:
        """The product's packages: the top-level ones setup.cfg installs (its
        ``[options.packages.find]`` ``include``)."""
        parser = configparser.ConfigParser()
        parser.read(self.root / "setup.cfg", encoding="utf-8")
        include = parser["options.packages.find"]["include"].split()
        return frozenset(name for name in include if "." not in name)

    def module_file(self, dotted: str) -> Path | None:
        """The file of module ``dotted`` (a package's ``__init__.py``), or None."""
        base = self.root.joinpath(*dotted.split("."))
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        return None

    def resolve(self, dotted: str) -> str | None:
        """None when ``dotted`` (`launcher.workers.remote`, `tests.support.waiting.wait_for`) is a
        module of the repository or a name one defines, else what is missing."""
        parts = dotted.split(".")
        module = None
        for i in range(len(parts), 0, -1):
            name = ".".join(parts[:i])
            if self.module_file(name) is not None or (self.root.joinpath(*parts[:i])).is_dir():
                module = i
                break
        if module is None:
            return f"no module {parts[0]}"
        rest = parts[module:]
        if not rest:
            return None
        where = ".".join(parts[:module])
        source = self.module_file(where)
        if source is None:
            return f"no module {where}.{rest[0]}"
        names = _defined(source.read_text(encoding="utf-8"))
        names.update(dict.fromkeys(MODULE_ATTRIBUTES))
        if rest[0] not in names:
            return f"{where} ({source.relative_to(self.root)}) defines no {rest[0]}"
        members = names[rest[0]]
        if len(rest) > 1 and members is not None and rest[1] not in members:
            return f"{where}.{rest[0]} has no {rest[1]}"
        return None

    # -- make --------------------------------------------------------------------------------

    @functools.cached_property
    def makefile(self) -> str:
        return (self.root / "Makefile").read_text(encoding="utf-8")

    @functools.cached_property
    def make_targets(self) -> frozenset[str]:
        targets: set[str] = set()
        for match in re.finditer(
            r"^([A-Za-z0-9_.%/-]+(?:\s+[A-Za-z0-9_.%/-]+)*)\s*:(?!=)", self.makefile, re.M
        ):
            targets.update(match.group(1).split())
        return frozenset(t for t in targets if not t.startswith(".") and "%" not in t)

    @functools.cached_property
    def make_variables(self) -> frozenset[str]:
        """Variables the Makefile reads (`$(NODES)`, `$(if $(KUEUE),...)`)."""
        return frozenset(re.findall(r"\$[({]([A-Z][A-Z0-9_]*)[)}]", self.makefile))

    # -- flags -------------------------------------------------------------------------------

    def defined_flags(self, files: list[Path]) -> frozenset[str]:
        """The long flags the parsers in ``files`` define (`add_argument`, `OptionParser.option`),
        and argparse's `--help`."""
        return frozenset({"--help"} | {f for path in files for f in _parser_flags(path)})

    @functools.cached_property
    def all_flags(self) -> frozenset[str]:
        """Every long flag the repository defines or passes to a program it runs: the parsers'
        flags and every `--word` in its Python strings, shell scripts and Makefile."""
        found: set[str] = set()
        for path in _walk(self.root):
            if path.relative_to(self.root).parts[0] in TEST_FOLDERS:
                # (a flag only a test names, `--bogus`, is not one a user can give; the
                # options a test session reads from its pytest plugins are)
                found.update(_read_options(path) if path.suffix == ".py" else ())
                continue
            if path.suffix == ".py":
                found.update(_parser_flags(path))
                found.update(_string_flags(path))
                found.update(_read_options(path))
            elif path.suffix == ".sh" or path.name == "Makefile":
                found.update(FLAG_WORD.findall(path.read_text(encoding="utf-8")))
        return frozenset(found)

    @functools.cached_property
    def console_scripts(self) -> dict[str, str]:
        """`dglctl` -> `dgl_operator.cli`, from setup.cfg."""
        text = (self.root / "setup.cfg").read_text(encoding="utf-8")
        section = text.split(CONSOLE_SCRIPTS_SECTION, 1)[1]
        scripts = {}
        for line in section.splitlines()[1:]:
            match = re.fullmatch(r"\s+([\w-]+)\s*=\s*([\w.]+):\w+", line)
            if not match:
                break
            scripts[match.group(1)] = match.group(2)
        return scripts

    def program_files(self, program: str) -> list[Path] | None:
        """The source files whose parsers make ``program``'s command line: a console script's
        package, a module's package or file (`python -m M`), a script (`hack/x.py`) with the
        folders it imports from beside it; None for a program that is not ours."""
        if program in self.console_scripts:
            return self._package_of(self.console_scripts[program])
        if program.endswith(".py"):
            script = self.root / program.removeprefix("./")
            if not script.is_file():
                return None
            files = [script]
            for name in _imported_tops(script):
                beside = script.parent / name
                if beside.is_dir():
                    files.extend(beside.glob("**/*.py"))
            return files
        if re.fullmatch(r"[\w.]+", program) and program.split(".")[0] in self.packages:
            if (
                self.module_file(program) is None
                and not self.root.joinpath(*program.split(".")).is_dir()
            ):
                return None
            return self._package_of(program)  # its parser may be in a module beside it
        return None

    def verbs(self, program: str) -> dict[str, frozenset[str]] | None:
        """``verb -> its long flags`` (with the program's own, which every verb takes) for a
        console script whose module builds its parser in ``parser()`` with subcommands
        (`dglctl`); None for any other program."""
        module = self.console_scripts.get(program)
        if module is None or self.root != REPO_ROOT:
            return None
        build = getattr(importlib.import_module(module), "parser", None)
        top = build() if callable(build) else None
        if not isinstance(top, argparse.ArgumentParser):
            return None
        subs = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return None
        own = _long_options(top)
        return {verb: own | _long_options(p) for verb, p in subs[0].choices.items()}

    def _package_of(self, module: str) -> list[Path]:
        top = self.root / module.split(".")[0]
        return list(top.glob("**/*.py")) if top.is_dir() else [top.with_suffix(".py")]

    # -- images ------------------------------------------------------------------------------

    @functools.cached_property
    def version(self) -> str:
        """setup.cfg's version: the tag hack/build_images.py gives every image."""
        match = re.search(
            r"^version\s*=\s*(\S+)", (self.root / "setup.cfg").read_text(encoding="utf-8"), re.M
        )
        return match.group(1) if match else ""

    @functools.cached_property
    def image_tag_suffixes(self) -> dict[str, frozenset[str]]:
        """The repositories of the images the build makes (`ImageSpec(repository=...)`), each
        with the suffixes its tags may carry after the version (`tag_suffix=`: every string
        in its expression, e.g. `"-gpu" if gpu else ""`)."""
        found: dict[str, set[str]] = {}
        for node in _nodes(self.root / IMAGES_MODULE):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "ImageSpec"
            ):
                continue
            given = {k.arg: k.value for k in node.keywords}
            name = given.get("repository")
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                continue
            suffixes = found.setdefault(name.value, set())
            suffix = given.get("tag_suffix")
            strings = [] if suffix is None else [
                n.value for n in ast.walk(suffix)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]  # fmt: skip
            suffixes.update(strings or [""])
        return {name: frozenset(s) for name, s in found.items()}

    @property
    def image_repositories(self) -> frozenset[str]:
        return frozenset(self.image_tag_suffixes)

    # -- the chart ---------------------------------------------------------------------------

    @functools.cached_property
    def values(self) -> dict[str, Any]:
        loaded = yaml.safe_load((self.root / CHART / "values.yaml").read_text(encoding="utf-8"))
        return loaded if isinstance(loaded, dict) else {}

    def value_missing(self, key: str) -> str | None:
        """None when ``key`` (`metrics.serviceMonitor.enabled`) is a value of the chart, else
        the part of it that is not; below a value whose default is an empty map (`resources`,
        `nodeSelector`) any key is the user's."""
        node: Any = self.values
        for i, part in enumerate(key.split(".")):
            if not isinstance(node, dict):
                return ".".join(key.split(".")[: i + 1])
            if not node and i > 0:
                return None
            if part not in node:
                return ".".join(key.split(".")[: i + 1])
            node = node[part]
        return None


def _long_options(p: argparse.ArgumentParser) -> frozenset[str]:
    return frozenset(o for a in p._actions for o in a.option_strings if o.startswith("--"))


def _walk(root: Path) -> Iterator[Path]:
    for path in root.iterdir():
        if path.name in SKIPPED_DIRS or path.name.endswith(".egg-info"):
            continue
        yield path
        if path.is_dir() and not path.is_symlink():
            yield from _walk(path)


@functools.cache
def _tree(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return None


def _nodes(path: Path) -> Iterator[ast.AST]:
    tree = _tree(path)
    return ast.walk(tree) if tree is not None else iter(())


def _strings(nodes: Iterable[ast.expr]) -> Iterator[str]:
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


# calls that define a flag: argparse's, OptionParser's, and a dataclass field's declaration
# (podprogram.flagfields' flag and declare, dglrun's launcher.options.option)
FLAG_CALLS = ("add_argument", "option", "flag", "declare")


def _parser_flags(path: Path) -> set[str]:
    """The flags of `p.add_argument("--x", ...)`, `p.option("--x", ...)` calls and of the
    fields declared with `flag("--x", ...)`, `declare("--x", ...)` or `option("--x", ...)`."""
    return {
        arg
        for node in _nodes(path)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in FLAG_CALLS)
            or (isinstance(node.func, ast.Name) and node.func.id in FLAG_CALLS)
        )
        for arg in _strings(node.args)
        if arg.startswith("--")
    }


def _read_options(path: Path) -> set[str]:
    """The options a pytest session reads, `config.getoption("k8s_kubeconfig")`, as flags
    (`--k8s-kubeconfig`: a plugin's, pytest-kubernetes')."""
    return {
        "--" + name.replace("_", "-")
        for node in _nodes(path)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "getoption"
        for name in _strings(node.args[:1])
        if not name.startswith("-")
    }


def _string_flags(path: Path) -> set[str]:
    """Every `--word` in the file's string constants (the flags it passes to programs)."""
    strings = [n for n in _nodes(path) if isinstance(n, ast.Constant)]
    return {flag for text in _strings(strings) for flag in FLAG_WORD.findall(text)}


def _imported_tops(path: Path) -> set[str]:
    names: set[str] = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _defined(source: str) -> dict[str, set[str] | None]:
    """A module's top-level names; a class's with the names its body defines (None: unknown)."""
    names: dict[str, set[str] | None] = {}
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members: set[str] = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            names[node.name] = members if not node.bases else None  # inherited: unknown
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, (ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    names.setdefault(sub.name, None)
                elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                    for alias in sub.names:
                        names.setdefault((alias.asname or alias.name).split(".")[0], None)
    return names
