"""What a document names, read from its code: every inline code span (`...`) and every line of a
fenced code block, each with its line number. Prose outside code is never read, so a word is
checked only when the author marked it as code. A Python file's docstrings (:func:`docstrings`)
are read whole, a line a span: the code's own prose.

A span is then read for the kinds of names `truth` can check:

- **commands** (`make demo JOB=...`, `dglctl logs NAME -f`, `python hack/build_images.py
  --registry R`, `helm install ... --set kueue=true`): the program, then its words up to the
  next `|`, `;`, `&&` or `#`; in a ```yaml block, a container's `command:` and `args:` lists
  too (`command: [dglrun]`, `args: [--graph-name, g, ...]`), as one command line;
- **paths** (`controller/sync.py`, `delivery/pull.py`, `partition_cache.py`);
- **dotted names** (`launcher.workers.remote`, `tests.support.waiting.wait_for`);
- **flags** standing alone (`--gang-scheduling`);
- **chart values** in the first column of a table whose header's first cell is `value`, and
  the span right after the words "chart value".
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

# a word holding one of these is a pattern, not a name: `runs/<job>-<uid>/`, `bench.<name>`
PLACEHOLDERS = ("<", ">", "*", "{", "}", "...", "…", "$", "~", "[", "]")
FENCE = re.compile(r"^\s*(```|~~~)")
SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.DOTALL)
# what has a docstring
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
SEPARATORS = {"|", ";", "&&", "||", "#", "&", ">", "2>&1"}
# the punctuation prose puts around a word inside a span
STRIP = ",.:;()'\""


@dataclass(frozen=True)
class Span:
    """One piece of code in a document: its text, its line, and where it stands."""

    doc: str  # the document's path in the repository
    line: int
    text: str
    in_block: bool  # a line of a fenced code block
    value_column: bool  # the first cell of a table row whose header is `value`
    after_chart_value: bool  # prose just before it ends with "chart value"
    in_yaml: bool = False  # a line of a ```yaml block (its containers' commands: their own span)

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def spans(doc: str, text: str) -> list[Span]:
    """Every code span and fenced line of a Markdown document, in order (a fenced line ending
    in a backslash continues on the next: one span, at its first line)."""
    found: list[Span] = []
    prose: list[tuple[int, str]] = []  # (line number, line) outside fences
    in_fence = False
    pending: tuple[int, str] | None = None  # a fenced command continued on the next line
    yaml_block: list[tuple[int, str]] | None = None  # the lines of a ```yaml block
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            if in_fence and line.strip()[3:].strip().lower() in ("yaml", "yml"):
                yaml_block = []
            elif not in_fence and yaml_block is not None:
                found.extend(container_commands(doc, yaml_block))
                yaml_block = None
            continue
        if yaml_block is not None:
            yaml_block.append((number, line))
        if not in_fence:
            prose.append((number, line))
            continue
        start, code = pending if pending else (number, "")
        code = f"{code} {line.strip()}".strip()
        pending = (start, code[:-1].rstrip()) if code.endswith("\\") else None
        if pending is None and code:
            found.append(Span(doc, start, code, True, False, False, yaml_block is not None))
    found.extend(_inline(doc, prose))
    return sorted(found, key=lambda s: s.line)


def container_commands(doc: str, block: list[tuple[int, str]]) -> Iterator[Span]:
    """The command line of each container in a YAML block whose ``command`` (or, without one,
    ``args``) starts with a program of ours: one span, ``command + args`` as a shell would
    write them, at the line of its ``command:`` (or ``args:``). A block that does not parse
    (``...`` standing for the rest) gives none."""
    try:
        documents = list(yaml.safe_load_all("\n".join(line for _, line in block)))
    except yaml.YAMLError:
        return
    # (each ``command:`` and ``args:`` key in the block's text, in order, with its line)
    keys = iter([n for n, ln in block for _ in re.finditer(r"(?<![\w-])(?:command|args):", ln)])
    for mapping in _mappings(documents):
        lines = [next(keys, 0) for key in ("command", "args") if key in mapping]
        command, args = mapping.get("command"), mapping.get("args")
        argv = [str(w) for v in (command, args) if isinstance(v, list) for w in v]
        if argv and argv[0].rsplit("/", 1)[-1] in PROGRAMS:
            yield Span(doc, lines[0], shlex.join(argv), True, False, False)


def _mappings(node: object) -> Iterator[dict[str, object]]:
    """Every mapping in a parsed YAML tree, parents first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _mappings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _mappings(value)


def _inline(doc: str, prose: list[tuple[int, str]]) -> Iterator[Span]:
    # a paragraph at a time (a span may run over a line break, never over a blank line); a
    # table row on its own (a span never runs over a cell)
    paragraph: list[tuple[int, str]] = []
    value_table = False
    previous_row = False
    for number, line in [*prose, (0, "")]:
        row = line.strip().startswith("|")
        if row or not line.strip():
            yield from _paragraph(doc, paragraph)
            paragraph = []
        if row:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not previous_row:  # the header
                value_table = cells[0].lower() == "value"
            elif not set("".join(cells)) <= set("-: "):  # not the header's rule
                yield from _row(doc, number, cells, value_table)
        elif line.strip():
            paragraph.append((number, line))
        previous_row = row


def _row(doc: str, number: int, cells: list[str], value_table: bool) -> Iterator[Span]:
    for column, cell in enumerate(cells):
        for match in SPAN.finditer(cell):
            text = match.group(2).strip()
            yield Span(doc, number, text, False, value_table and column == 0, False)


def _paragraph(doc: str, paragraph: list[tuple[int, str]]) -> Iterator[Span]:
    if not paragraph:
        return
    text = "\n".join(line for _, line in paragraph)
    starts = []
    offset = 0
    for number, line in paragraph:
        starts.append((offset, number))
        offset += len(line) + 1
    for match in SPAN.finditer(text):
        number = max(n for o, n in starts if o <= match.start())
        before = text[: match.start()].rstrip().lower()
        chart_value = before.endswith(("chart value", "chart values"))
        yield Span(doc, number, " ".join(match.group(2).split()), False, False, chart_value)


def words(text: str) -> list[str]:
    """A span's words as a shell would split them (quotes kept when they do not parse)."""
    try:
        return shlex.split(text, comments=False)
    except ValueError:
        return text.split()


def clean(word: str) -> str:
    """A word without the prose punctuation around it."""
    return word.strip(STRIP)


def is_pattern(word: str) -> bool:
    return any(p in word for p in PLACEHOLDERS)


@dataclass(frozen=True)
class Command:
    """A program named in a span and the words given to it."""

    span: Span
    program: str  # "make", "dglctl", "helm", "hack/build_images.py", "bench.nodes_bench", ...
    args: tuple[str, ...]


PREFIXES = ("sudo", "env", "exec", "time")
PROGRAMS = (
    "dglctl",
    "dglrun",
    "dgl-operator",
    "watcher-loop",
    "kubectl-download",
    "dgl-chunk-graph",
)


def commands(span: Span) -> Iterator[Command]:
    """The commands of ours that a span runs: make, helm, our console scripts, `python -m M`
    and `python path.py` (also after `sudo`, `env`, a variable assignment or a path to a
    virtualenv's python)."""
    ws = words(span.text)
    i = 0
    at_start = True  # a program is named first, or after a separator, `sudo`, `VAR=x`
    while i < len(ws):
        word = ws[i]
        if word in SEPARATORS:
            at_start, i = True, i + 1
            continue
        if at_start and (word in PREFIXES or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", word)):
            i += 1
            continue
        found = _program_args(ws, i) if at_start else None
        at_start = False
        if found is None:
            i += 1
            continue
        program, begin = found
        end = begin
        while end < len(ws) and ws[end] not in SEPARATORS and not ws[end].startswith("#"):
            end += 1
        yield Command(span, program, tuple(ws[begin:end]))
        i = end


def _program_args(ws: list[str], i: int) -> tuple[str, int] | None:
    """The program started by the word at ``i`` and where its arguments begin, or None."""
    word = ws[i]
    name = word.rsplit("/", 1)[-1]
    if name in ("make", "helm", *PROGRAMS):
        return name, i + 1
    if re.fullmatch(r"python[0-9.]*", name):
        j = i + 1
        while j < len(ws) and ws[j] in ("-P", "-u", "-B"):
            j += 1
        if j + 1 < len(ws) and ws[j] == "-m":
            return ws[j + 1], j + 2
        if j < len(ws) and ws[j].endswith(".py"):
            return ws[j], j + 1
        return None
    if word.endswith(".py") and "/" in word:
        return word, i + 1  # `hack/build_images.py --registry R`
    return None


def flags(args: tuple[str, ...]) -> list[str]:
    """The long flags among a command's words (`--set` values are not flags)."""
    found = [clean(a).split("=", 1)[0] for a in args]
    return [f for f in found if re.fullmatch(r"--[a-z][a-z0-9_-]*", f)]


def read(repo: Path, doc: str) -> list[Span]:
    return spans(doc, (repo / doc).read_text(encoding="utf-8"))


def docstrings(repo: Path, path: str) -> list[Span]:
    """Every line of a Python file's docstrings (the module's, each class's and each
    function's), read by its syntax tree, nothing imported: what the code's own prose names,
    in code or not. Comments and other strings are not read."""
    tree = ast.parse((repo / path).read_text(encoding="utf-8"), path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, DOCUMENTED):
            continue
        text = ast.get_docstring(node, clean=False)
        if text is None:
            continue
        first = node.body[0].lineno  # the docstring's opening line
        for offset, line in enumerate(text.splitlines()):
            found.append(Span(path, first + offset, line, False, False, False))
    return sorted(found, key=lambda s: s.line)
