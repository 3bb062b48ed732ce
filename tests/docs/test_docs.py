"""The documents name only what the code has: repository paths and Python modules that exist
(and no near miss of a top-level folder, `doc/`), `make` targets and variables of the Makefile,
flags our programs' parsers define (each of dglctl's verbs its own; in YAML `args:` lists too;
never a flag only a test names), values of the chart. The truth is read from the code
(tests/docs/truth.py); a document's names from its code spans and code blocks
(tests/docs/references.py); the rules are tests/docs/checks.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.checks import RULES, stale_images
from tests.docs.references import read, spans
from tests.docs.truth import Repository

REPO = Path(__file__).resolve().parents[2]
# the init containers' images the operator names when no flag does
OPERATOR_DEFAULTS = "controller/builders/options.py"
DOC_PATTERNS = (
    "README.md",
    "CONTRIBUTING.md",
    "docs/*.md",
    "images/README.md",
    "charts/*/README*",
    "examples/**/README*",
)


def documents() -> list[str]:
    return sorted(
        {p.relative_to(REPO).as_posix() for pattern in DOC_PATTERNS for p in REPO.glob(pattern)}
    )


@pytest.fixture(scope="module")
def repo() -> Repository:
    return Repository(REPO)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_documents_name_only_what_the_code_has(rule: str, repo: Repository) -> None:
    problems = [p for doc in documents() for p in RULES[rule](read(REPO, doc), repo)]
    assert not problems, f"{len(problems)} stale name(s) in the docs ({rule}):\n" + "\n".join(
        problems
    )


def test_the_documents_and_examples_name_the_images_the_build_makes(repo: Repository) -> None:
    manifests = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("examples/**/*.yaml"))
    files = [*documents(), *manifests, OPERATOR_DEFAULTS]
    problems = [
        p for f in files for p in stale_images(f, (REPO / f).read_text(encoding="utf-8"), repo)
    ]
    assert not problems, f"{len(problems)} image(s) the build does not make:\n" + "\n".join(
        problems
    )


def test_every_kind_of_document_is_read() -> None:
    docs = documents()
    for must in ("README.md", "CONTRIBUTING.md", "docs/operations.md", "images/README.md"):
        assert must in docs
    assert any(d.startswith("examples/") for d in docs)


def check(doc: str, text: str, repo: Repository) -> list[str]:
    found = spans(doc, text)
    return [p for rule in RULES.values() for p in rule(found, repo)]


def test_each_rule_names_the_document_the_line_and_the_missing_thing(repo: Repository) -> None:
    text = "\n".join(
        [
            "Partitions (`partition_cache.py`) and `launcher/storage/gone.py`.",  # 1
            "Run `make demo-huge NODES=3` or `make demo BOGUS=1`.",  # 2
            "`dglctl get --frobnicate` and `python hack/build_images.py --push-to R`.",  # 3
            "With the chart value `networkPolicy.strict=true`:",  # 4
            "```sh",  # 5
            "helm install x charts/dgl-operator --set kueue=true,kueue.mode=x",  # 6
            "```",  # 7
            "`launcher.workers.nowhere` and `tests.support.waiting.wait_until`;"  # 8
            " `--frobnicate-harder`.",
            "",
            "| value | default |",
            "| --- | --- |",
            "| `metrics.secured` | false |",  # 12
            "",
            "```sh",
            "dglctl wait my-gnn \\",  # 15: a command continued on the next line
            "  --for Succeeded --frobnicate-more",
            "```",
        ]
    )
    assert sorted(check("docs/architecture.md", text, repo)) == sorted(
        [
            "docs/architecture.md:1: `partition_cache.py`: no file of this name in the repository",
            "docs/architecture.md:1: `launcher/storage/gone.py`: "
            "no such file or folder in the repository",
            "docs/architecture.md:2: `make demo-huge`: the Makefile has no such target",
            "docs/architecture.md:2: `BOGUS=1`: the Makefile reads no such variable",
            "docs/architecture.md:3: `--frobnicate`: dglctl get has no such flag",
            "docs/architecture.md:3: `--push-to`: hack/build_images.py has no such flag",
            "docs/architecture.md:4: `networkPolicy.strict`: "
            "charts/dgl-operator/values.yaml has no networkPolicy.strict",
            "docs/architecture.md:6: `kueue.mode`: "
            "charts/dgl-operator/values.yaml has no kueue.mode",
            "docs/architecture.md:8: `launcher.workers.nowhere`: launcher.workers "
            "(launcher/workers/__init__.py) defines no nowhere",
            "docs/architecture.md:8: `tests.support.waiting.wait_until`: tests.support.waiting "
            "(tests/support/waiting.py) defines no wait_until",
            "docs/architecture.md:8: `--frobnicate-harder`: "
            "no parser or command line of the repository has this flag",
            "docs/architecture.md:12: `metrics.secured`: "
            "charts/dgl-operator/values.yaml has no metrics.secured",
            "docs/architecture.md:15: `--frobnicate-more`: dglctl wait has no such flag",
        ]
    )


def test_what_is_not_ours_is_not_checked(repo: Repository) -> None:
    text = "\n".join(
        [
            "`kubectl get dgljob/my-gnn -n a`, `kubectl apply -f examples/graphsage/dgljob.yaml`.",
            "Your `code/train.py`, `train.py`; mpirun's `--mca btl tcp,self`; `runs/<job>-<uid>/`.",
            "`resources.limits.memory` in a template; https://example.com/a/b.py; `~/.cache/y.py`.",
            "```yaml",
            "args: [--partition-entry-point, code/partition.py]",
            "---",
            "```",
        ]
    )
    assert check("docs/user-guide.md", text, repo) == []


def test_an_image_tag_the_build_does_not_give_is_named(repo: Repository) -> None:
    version = repo.version
    doc = (
        f"`dgloperator/graphsage:v0.1.0` `dgloperator/graphsage:{version}-gpu`\n"
        f"`dgloperator/dgl-operator:{version}-gpu` `dgloperator/nope:{version}`\n"
    )
    assert list(stale_images("d.md", doc, repo)) == [
        f"d.md:1: `dgloperator/graphsage:v0.1.0`: the build tags graphsage {version} or "
        f"{version}-gpu",
        f"d.md:2: `dgloperator/dgl-operator:{version}-gpu`: the build tags dgl-operator {version}",
        f"d.md:2: `dgloperator/nope:{version}`: the build makes no image nope",
    ]


def test_a_flag_of_another_verb_is_named_with_the_verb(repo: Repository) -> None:
    """Each of dglctl's verbs has its flags: `get` has no `--for` (`wait` has), `logs` no
    `--dry-run` (`submit` has); the flags every verb takes go before or after it."""
    text = (
        "`dglctl get my-gnn --for Succeeded`, `dglctl logs my-gnn --dry-run`,\n"
        "`dglctl wait my-gnn --for Failed -n team-a`, `dglctl -n a submit --dry-run j.yaml`.\n"
    )
    assert check("docs/user-guide.md", text, repo) == [
        "docs/user-guide.md:1: `--for`: dglctl get has no such flag",
        "docs/user-guide.md:1: `--dry-run`: dglctl logs has no such flag",
    ]


def test_a_containers_command_and_args_in_yaml_are_a_command_line(repo: Repository) -> None:
    text = "\n".join(
        [
            "```yaml",
            "containers:",
            "  - name: main",
            "    command: [dglrun]",  # 4
            "    args: [--graph-name, g, --num-partitions, '2',",
            "           --no-such-flag, '--train-args=--lr 0.01']",
            "  - {name: side, command: [dglrun], args: [--num-epochs, '2', --epoch-count, '3']}",
            "  - {name: theirs, command: [python, x.py], args: [--anything]}",
            "```",
            "```yaml",
            "args: [dglrun, ...]: not YAML, not read",
            "```",
        ]
    )
    assert check("docs/user-guide.md", text, repo) == [
        "docs/user-guide.md:4: `--no-such-flag`: dglrun has no such flag",
        "docs/user-guide.md:7: `--epoch-count`: dglrun has no such flag",
    ]


def test_a_first_folder_one_letter_off_is_named_with_the_path_meant(repo: Repository) -> None:
    text = (
        "See `doc/operations.md`, `example/graphsage/dgljob.yaml` and `chart/dgl-operator`;\n"
        "your `code/train.py` and `docs/operations.md` are fine.\n"
    )
    assert check("docs/user-guide.md", text, repo) == [
        "docs/user-guide.md:1: `doc/operations.md`: no top-level folder doc: docs/operations.md?",
        "docs/user-guide.md:1: `example/graphsage/dgljob.yaml`: no top-level folder example: "
        "examples/graphsage/dgljob.yaml?",
        "docs/user-guide.md:1: `chart/dgl-operator`: no top-level folder chart: "
        "charts/dgl-operator?",
    ]


def test_a_flag_only_a_test_names_is_not_one_of_the_repository(repo: Repository) -> None:
    """`--bogus` is in tests' strings (a refusal's example), not in any parser or command line
    of the product: a document that names it is stale. A pytest plugin's option the e2e
    session reads (`--k8s-kubeconfig`) is one."""
    assert check("docs/user-guide.md", "`--bogus`; `--k8s-kubeconfig`.\n", repo) == [
        "docs/user-guide.md:1: `--bogus`: no parser or command line of the repository has "
        "this flag",
    ]
