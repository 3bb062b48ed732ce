"""Every outside tool that an entry point's code starts, or points a daemon at, is declared for
that entry point in hack/prereqs.py, and every entry point runs its preflight first.

The scan reads the code (it does not look at what this machine has installed), so dropping a
declaration fails here even where the package happens to be installed. What it finds:

* Python: the literal program of ``subprocess.run/Popen/...``, of a helper ``_run("ip", ...)``,
  of ``Component(name, [prog, ...])``; the names given to ``shutil.which``/``find_tool`` (commands)
  and to ``tool``/``tool_paths``/``hack/tools.sh`` (declared tool names); absolute system paths
  (``/usr/...``, ``/sbin/...``) in any string. A line marked ``# prereqs: in the image`` names a
  path inside a container image, not on the host.
* Shell: the command word of every simple command (after ``|``, ``;``, ``&&``, ``$(``, ...).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import REPO


def _load_prereqs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prereqs", REPO / "hack" / "prereqs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("prereqs", module)
    spec.loader.exec_module(module)
    return module


prereqs = _load_prereqs()

SUBPROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call", "_run"}
COMMAND_LOOKUPS = {"which", "find_tool"}
TOOL_LOOKUPS = {"tool", "tool_paths"}
SYSTEM_PATH = re.compile(r"(?<![\w.~-])(/(?:usr|bin|sbin|lib|lib64|opt)/[\w./*+-]*)")
# a folder searched for commands (find_tool's /usr/sbin/<name>): not a binary of its own
SEARCH_DIRS = {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/", "/usr/local/bin/"}
IN_IMAGE = "prereqs: in the image"
IN_IMAGE_FILE = "prereqs: this file's system paths are inside the images"


@dataclass(frozen=True)
class Use:
    """Something a file makes the host provide: ``kind`` is command, tool or path."""

    kind: str
    name: str
    where: str


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _program(node: ast.expr | None) -> str | None:
    """The literal program of an argv: ``"ip"`` or ``["ip", ...]``."""
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        return _literal(node.elts[0])
    return _literal(node)


def _call_name(call: ast.Call, runners: set[str]) -> str:
    """``run`` for ``subprocess.run(...)`` or a runner imported by name (``_run`` is always one);
    a local variable called ``run`` (a kubectl callable) is not."""
    f = call.func
    if isinstance(f, ast.Attribute):
        if f.attr in SUBPROCESS_CALLS:
            return f.attr if isinstance(f.value, ast.Name) and f.value.id == "subprocess" else ""
        return f.attr
    if isinstance(f, ast.Name):
        return f.id if f.id not in SUBPROCESS_CALLS or f.id in runners else ""
    return ""


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and _literal(first.value) is not None:
            ids.add(id(first.value))
    return ids


def python_uses(path: Path) -> Iterator[Use]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    skip = _docstrings(tree)
    rel = path.relative_to(REPO)
    runners = {"_run"} | {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "imagebuild.host")
        for a in node.names
    }
    in_image = IN_IMAGE_FILE in text
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            name, args = _call_name(node, runners), node.args
            if name in SUBPROCESS_CALLS and args:
                program = _program(args[0])
                if program and "/" not in program:
                    yield Use("command", program, where)
                if program and program.startswith("hack/tools.sh"):
                    yield from (Use("tool", a, where) for a in map(_literal, args[1:]) if a)
            elif name == "Component" and len(args) > 1:
                program = _program(args[1])
                if program and "/" not in program:
                    yield Use("command", program, where)
            elif name in COMMAND_LOOKUPS and args and _literal(args[0]):
                yield Use("command", str(_literal(args[0])), where)
            elif name in TOOL_LOOKUPS:
                yield from (Use("tool", a, where) for a in map(_literal, args) if a)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            line = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
            if in_image or IN_IMAGE in line:
                continue
            for m in SYSTEM_PATH.finditer(node.value):
                if m.group(1) not in SEARCH_DIRS:
                    yield Use("path", m.group(1), f"{rel}:{node.lineno}")


SHELL_WORDS = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "function", "return", "exit", "set", "export", "local", "readonly", "shift", "cd",
    "echo", "printf", "exec", "command", "source", ".", "[", "[[", "test", "true", "false",
    "read", "trap", "wait", "eval", "unset", "declare", "break", "continue", "!", "{", "}",
}  # fmt: skip
COMMAND_START = re.compile(r"(?:^|\|\||&&|[|;(`]|\$\(|\bthen\b|\bdo\b|\belse\b|\bif\b|!)\s*")


def shell_uses(path: Path) -> Iterator[Use]:
    rel = path.relative_to(REPO)
    text = path.read_text()
    functions = set(re.findall(r"^\s*([\w-]+)\s*\(\)", text, re.M))
    heredoc: str | None = None
    lines = []
    for raw in text.splitlines():  # heredoc bodies and comments hold no commands
        if heredoc is not None:
            heredoc = None if raw.strip() == heredoc else heredoc
            lines.append("")
            continue
        m = re.search(r"<<-?\s*'?(\w+)'?", raw)
        heredoc = m.group(1) if m else None
        lines.append(re.sub(r"(^|\s)#.*$", "", raw))
    # nor do strings (which may span lines): each becomes "" with its newlines kept
    text = re.sub(
        r"'[^']*'|\"(?:[^\"\\]|\\.)*\"",
        lambda m: '""' + "\n" * m.group(0).count("\n"),
        "\n".join(lines),
    )
    text = re.sub(r"\$\(\(.*?\)\)", "0", text)  # $((arithmetic)) is no command
    for number, line in enumerate(text.splitlines(), 1):
        for start in COMMAND_START.finditer(line):
            rest = line[start.end() :]
            try:
                words = shlex.split(rest, comments=False)
            except ValueError:
                words = rest.split()
            while words and re.fullmatch(r"\w+=\S*", words[0]):  # VAR=value cmd
                if "$(" in words[0] or "`" in words[0]:
                    words = []  # x=$(cmd ...): cmd is found at its own "$("
                words = words[1:]
            if words and words[0] == "command" and words[1:2] == ["-v"]:
                words = words[2:]
            word = words[0] if words else ""
            if not re.fullmatch(r"[a-z][\w.+-]*", word) or word in SHELL_WORDS | functions:
                continue
            yield Use("command", word, f"{rel}:{number}")


def code_files(roots: tuple[str, ...]) -> Iterator[Path]:
    for root in roots:
        path = REPO / root
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if (
                f.suffix in (".py", ".sh")
                and f.name != "prereqs.py"
                and "__pycache__" not in f.parts
            ):
                yield f


def uses_of(roots: tuple[str, ...]) -> list[Use]:
    found: list[Use] = []
    for f in code_files(roots):
        found.extend(python_uses(f) if f.suffix == ".py" else shell_uses(f))
    return found


def undeclared(entry: object, tools: dict[str, object]) -> list[str]:
    """What ``entry``'s code uses that none of its declared tools covers."""
    names = entry.tools  # type: ignore[attr-defined]
    provides = {p for n in names for p in tools[n].provides}  # type: ignore[attr-defined]
    paths = {p for p in provides if p.startswith("/")}
    problems = []
    for use in uses_of(entry.code):  # type: ignore[attr-defined]
        if use.kind == "tool":
            ok = use.name in names
        elif use.kind == "command":
            ok = use.name in provides
        else:
            ok = any(use.name == p or use.name.startswith(p.rstrip("/") + "/") for p in paths)
        if not ok:
            problems.append(f"{use.where}: {use.kind} {use.name!r}")
    return sorted(set(problems))


@pytest.mark.parametrize("name", sorted(prereqs.ENTRY_POINTS))
def test_every_binary_an_entry_points_code_starts_is_declared_for_it(name: str) -> None:
    entry = prereqs.ENTRY_POINTS[name]
    problems = undeclared(entry, prereqs.TOOLS)
    assert not problems, (
        f"make {name} runs code that needs these, undeclared in hack/prereqs.py "
        f"(ENTRY_POINTS[{name!r}].tools):\n" + "\n".join(problems)
    )


def test_the_scan_finds_what_the_local_cluster_starts() -> None:
    """The scan has teeth: it sees the node's runtime tools, its bridges' `ip`, and a CNI
    folder that a daemon would be pointed at."""
    uses = {(u.kind, u.name) for u in uses_of(("localcluster",))}
    assert {("tool", "cni"), ("tool", "runc"), ("tool", "containerd"), ("command", "ip")} <= uses
    assert ("command", "umount") in uses and ("command", "openssl") in uses


@pytest.mark.parametrize("dropped", ["cni", "runc", "ip", "openssl"])
def test_dropping_a_declaration_fails_the_scan(dropped: str) -> None:
    """What commit 4bd77fc did (cluster-up lost cni and runc) is caught, whatever the machine
    has installed."""
    entry = prereqs.ENTRY_POINTS["cluster-up"]
    shrunk = replace(entry, tools=tuple(t for t in entry.tools if t != dropped))
    assert undeclared(entry, prereqs.TOOLS) == []
    problems = undeclared(shrunk, prereqs.TOOLS)
    assert problems and all(dropped in p or "command" in p for p in problems), problems


def test_a_daemon_pointed_at_an_undeclared_system_path_is_found(tmp_path: Path) -> None:
    src = REPO / "localcluster" / "_scan_probe.py"
    src.write_text('CONFIG = """\n  bin_dir = "/usr/lib/weird-plugins"\n"""\n')
    try:
        uses = uses_of(("localcluster/_scan_probe.py",))
    finally:
        src.unlink()
    assert [(u.kind, u.name) for u in uses] == [("path", "/usr/lib/weird-plugins")]


def test_the_shell_scan_reads_command_words(tmp_path: Path) -> None:
    script = REPO / "hack" / "_scan_probe.sh"
    script.write_text(
        "#!/usr/bin/env bash\n# iptables in a comment\nf() { :; }\n"
        'x=$(go env GOPROXY | tr "a" "b") && runc list\nf\necho "debootstrap"\n'
        "python3 - <<'PY'\nimport gcc\nPY\nFOO=1 ctr version\n"
    )
    try:
        words = [u.name for u in uses_of(("hack/_scan_probe.sh",))]
    finally:
        script.unlink()
    assert words == ["go", "tr", "runc", "python3", "ctr"]


MAKE_ENTRY_POINTS = {
    "demo": "demo",
    "demo-local": "demo-local",
    "cluster-up": "cluster-up",
    "control-plane-up": "control-plane",
    "test": "test",
    "unit": "test",
    "bench": "bench",
    "check": "check",
}


@pytest.mark.parametrize("target", sorted(MAKE_ENTRY_POINTS))
def test_every_entry_point_runs_its_preflight_first(target: str) -> None:
    makefile = (REPO / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:\s*(\S+)", makefile, re.M)
    assert m, f"no target {target} in the Makefile"
    first = m.group(1)
    assert first.startswith("preflight-"), f"make {target}'s first prerequisite is {first}"
    for name in first.removeprefix("preflight-").split("$(")[0].split("+"):
        assert name == MAKE_ENTRY_POINTS[target]
        assert name in prereqs.ENTRY_POINTS


def test_the_test_entry_point_covers_every_layer() -> None:
    layers = [e for n, e in prereqs.ENTRY_POINTS.items() if n.startswith("test-")]
    assert len(layers) >= 8
    union = {t for e in layers for t in e.tools}
    assert union == set(prereqs.ENTRY_POINTS["test"].tools)


def test_every_declared_tool_is_known_and_every_debian_need_names_a_package() -> None:
    for entry in prereqs.ENTRY_POINTS.values():
        assert set(entry.tools) <= set(prereqs.TOOLS), entry.name
        for path in entry.code:
            assert (REPO / path).exists(), f"{entry.name}: {path} does not exist"
    for tool in prereqs.TOOLS.values():
        assert tool.needs and tool.provides and tool.why
        assert tool.source in {
            prereqs.DEBIAN,
            prereqs.WHEEL,
            prereqs.MACHINE,
            prereqs.ESSENTIAL,
            prereqs.BUILT,
            prereqs.VENV,
        }


def test_an_unknown_entry_point_or_tool_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert prereqs.main(["resolve", "demo-typo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("preflight: unknown entry point 'demo-typo'") and "\n" not in err
    assert prereqs.main(["paths", "nosuchtool"]) == 2
    assert "unknown tool(s) nosuchtool" in capsys.readouterr().err


def test_a_machine_tool_that_is_missing_stops_with_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(
        prereqs.TOOLS, "go", replace(prereqs.TOOLS["go"], needs=(prereqs.Need("go-absent", "Go"),))
    )
    assert prereqs.main(["resolve", "scheduler-plugins"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'go-absent' (Go)" in err and "make scheduler-plugins" in err
