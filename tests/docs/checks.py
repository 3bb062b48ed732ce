"""The rules: each takes a document's spans and the repository, and returns one line per name
the code lacks, `doc:line: `name`: why`."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator

from tests.docs.references import Command, Span, clean, commands, flags, is_pattern, words
from tests.docs.truth import Repository

# a path: words joined by slashes, starting at a word boundary that is not a slash or a dot
# (not the middle of a URL, not `~/.cache/...`)
PATH = re.compile(r"(?<![\w./~:$-])((?:[\w.-]+/)+[\w.-]*)(?![\w/<*{$])")
BARE_PY = re.compile(r"(?<![\w./-])([A-Za-z_]\w*\.py)(?![\w/])")
DOTTED = re.compile(r"(?<![\w./:-])([a-z_][a-z0-9_]*(?:\.[A-Za-z_]\w*)+)(?![\w/<-])")
IMAGE = re.compile(r"(?<![\w.-])(?:docker\.io/)?dgloperator/([\w.-]+):([\w.<>-]+)")
FLAG = re.compile(r"--[a-z][a-z0-9_-]*")
# the documents about the repository's own code: a Python file they name is one of ours
CODE_DOCS = {"README.md", "CONTRIBUTING.md", "docs/architecture.md", "docs/local-cluster.md"}
FILE_SUFFIXES = {"py", "md", "yaml", "yml", "json", "sh", "txt", "cfg", "toml", "tpl", "html", "c"}

Rule = Callable[[list[Span], Repository], Iterator[str]]


def _problem(span: Span, name: str, why: str) -> str:
    return f"{span.where()}: `{name}`: {why}"


def missing_paths(spans: list[Span], repo: Repository) -> Iterator[str]:
    """A path under a top-level entry of the repository (`controller/sync.py`) must exist. In
    the documents about the repository's code (`CODE_DOCS`), where a Python file is one of
    ours, a path starting elsewhere (`delivery/pull.py`) must also be the end of one and a
    bare Python file name (`partition_cache.py`) some file's name; elsewhere such names are the
    user's own (`code/train.py` in a user's image). In a kubectl command only the files after
    `-f` are paths (`dgljob/my-gnn` is an object)."""
    for span in spans:
        ours = span.doc in CODE_DOCS and not span.in_block
        for match in PATH.finditer(_without_kubectl_objects(span.text)):
            path = match.group(1).rstrip(".")
            first = path.removeprefix("./").split("/")[0]
            if first in repo.top_level:
                if not repo.exists(path):
                    yield _problem(span, path, "no such file or folder in the repository")
            elif (meant := _misspelt_top(path, repo)) is not None:
                yield _problem(span, path, f"no top-level folder {first}: {meant}?")
            elif ours and path.rsplit(".", 1)[-1] == "py" and not repo.ends_with(path):
                yield _problem(span, path, "no file of the repository ends with this path")
        for match in BARE_PY.finditer(span.text) if ours else ():
            name = match.group(1)
            if not any(p == name or p.endswith("/" + name) for p in repo.paths):
                yield _problem(span, name, "no file of this name in the repository")


def _misspelt_top(path: str, repo: Repository) -> str | None:
    """``doc/operations.md`` -> ``docs/operations.md``: a path whose first folder is not the
    repository's but is one letter or so from one of its folders, under which the rest of the
    path exists (a user's own `code/train.py` is left alone: nothing of ours is called so)."""
    first, _, rest = path.removeprefix("./").partition("/")
    if not rest:
        return None
    for near in difflib.get_close_matches(first, sorted(repo.top_level), n=3, cutoff=0.75):
        if repo.exists(f"{near}/{rest}"):
            return f"{near}/{rest}"
    return None


def _without_kubectl_objects(text: str) -> str:
    """`kubectl get dgljob/x -f f.yaml` -> `kubectl get -f f.yaml`: kubectl's TYPE/NAME words
    are not paths."""
    ws = words(text)
    if "kubectl" not in ws:
        return text
    kept = [
        w for i, w in enumerate(ws) if "/" not in w or (i and ws[i - 1] in ("-f", "--filename"))
    ]
    return " ".join(kept)


def missing_modules(
    spans: list[Span], repo: Repository, packages: frozenset[str] | None = None
) -> Iterator[str]:
    """A dotted name starting with a top-level package (`launcher.workers.remote`,
    `tests.support.waiting.wait_for`) must be a module, or a name that module defines.
    ``packages``: only the names starting with one of these (default: every package)."""
    for span, dotted in module_names(spans, repo.packages if packages is None else packages):
        why = repo.resolve(dotted)
        if why is not None:
            yield _problem(span, dotted, why)


def module_names(spans: list[Span], packages: frozenset[str]) -> Iterator[tuple[Span, str]]:
    """The dotted names starting with one of ``packages`` that the spans hold, each with its
    span (`launcher.workers.remote`; a file name, `controller.py`, is not one)."""
    for span in spans:
        for match in DOTTED.finditer(span.text):
            dotted = match.group(1)
            parts = dotted.split(".")
            if parts[0] in packages and parts[-1] not in FILE_SUFFIXES:
                yield span, dotted


def missing_make(spans: list[Span], repo: Repository) -> Iterator[str]:
    """`make T VAR=x`: T must be a target of the Makefile, VAR a variable it reads."""
    for command in _commands(spans, "make"):
        for arg in command.args:
            if arg.startswith("-") or is_pattern(arg):
                continue
            if "=" in arg:
                var = arg.split("=", 1)[0]
                if var not in repo.make_variables:
                    yield _problem(command.span, arg, "the Makefile reads no such variable")
            elif clean(arg) and clean(arg) not in repo.make_targets:
                yield _problem(
                    command.span, f"make {clean(arg)}", "the Makefile has no such target"
                )


def missing_flags(spans: list[Span], repo: Repository) -> Iterator[str]:
    """A flag given to one of our programs must be one its parsers define; a flag standing
    alone (`--gang-scheduling`) must be one the repository defines or passes somewhere."""
    for span in spans:
        found = list(commands(span))
        for command in found:
            files = repo.program_files(command.program)
            if files is None:
                continue
            defined, who = repo.defined_flags(files), command.program
            verbs = repo.verbs(command.program) or {}
            verb = next((a for a in command.args if a in verbs), None)
            if verb is not None:  # (each verb its own flags: `dglctl logs` has no --dry-run)
                defined, who = verbs[verb], f"{command.program} {verb}"
            for flag in flags(command.args):
                if flag not in defined:
                    yield _problem(span, flag, f"{who} has no such flag")
        ws = words(span.text)
        if (
            not found
            and not span.in_yaml
            and ws
            and FLAG.fullmatch(clean(ws[0]).split("=", 1)[0])
            and ws[0] != "--set"
        ):
            flag = clean(ws[0]).split("=", 1)[0]
            if flag not in repo.all_flags:
                yield _problem(
                    span, flag, "no parser or command line of the repository has this flag"
                )


def missing_values(spans: list[Span], repo: Repository) -> Iterator[str]:
    """A chart value: `--set key=v` anywhere, a span in the first column of a `value` table,
    and the span right after the words "chart value"."""
    for span in spans:
        keys: list[str] = []
        ws = words(span.text)
        for i, word in enumerate(ws):
            if word in ("--set", "--set-string") and i + 1 < len(ws):
                keys.extend(kv.split("=", 1)[0] for kv in ws[i + 1].split(","))
            elif word.startswith(("--set=", "--set-string=")):
                keys.extend(kv.split("=", 1)[0] for kv in word.split("=", 1)[1].split(","))
        if (span.value_column or span.after_chart_value) and ws:
            keys.append(re.split(r"[=:]", clean(ws[0]))[0])  # `key`, `key=v`, `key: v`
        for key in keys:
            if is_pattern(key) or not key:
                continue
            missing = repo.value_missing(key)
            if missing is not None:
                yield _problem(span, key, f"charts/dgl-operator/values.yaml has no {missing}")


def stale_images(doc: str, text: str, repo: Repository) -> Iterator[str]:
    """An image of ours (`dgloperator/graphsage:0.2.0`, in a document or a manifest) must be one
    the build makes, with the tag it gives (setup.cfg's version): another tag is ErrImagePull
    on a cluster that pulls what was built and pushed."""
    for number, line in enumerate(text.splitlines(), start=1):
        for match in IMAGE.finditer(line):
            repository, tag = match.group(1), match.group(2)
            if is_pattern(tag):
                continue
            if repository not in repo.image_repositories:
                yield f"{doc}:{number}: `{match.group(0)}`: the build makes no image {repository}"
            elif tag not in (tags := sorted(repo.version + s for s in
                                            repo.image_tag_suffixes[repository])):  # fmt: skip
                why = f"the build tags {repository} {' or '.join(tags)}"
                yield f"{doc}:{number}: `{match.group(0)}`: {why}"


def _commands(spans: list[Span], program: str) -> Iterator[Command]:
    for span in spans:
        for command in commands(span):
            if command.program == program:
                yield command


RULES: dict[str, Rule] = {
    "paths": missing_paths,
    "modules": missing_modules,
    "make": missing_make,
    "flags": missing_flags,
    "values": missing_values,
}
