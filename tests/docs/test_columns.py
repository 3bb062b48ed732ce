"""Where a document lists the columns of `kubectl get dglj` (a comment after the command, the
chart's NOTES.txt), it lists the CRD's printer columns, each one and in their order."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "charts" / "dgl-operator" / "crds" / "qihoo.net_dgljobs.yaml"
NOTES = "charts/dgl-operator/templates/NOTES.txt"
# a line that lists them: `kubectl get dglj ... # PHASE, ...`, or NOTES.txt's "Watch it (...)"
LISTING = re.compile(r"get dglj\b[^#\n]*#\s*(?P<a>.*)|^Watch it \((?P<b>[^)]*)\)", re.M)


def columns() -> list[str]:
    """The printer columns `kubectl get dglj` shows without -o wide, AGE aside."""
    crd = yaml.safe_load(CRD.read_text())
    found = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    return [c["name"].upper() for c in found if not c.get("priority") and c["name"] != "Age"]


def stale_listings(doc: str, text: str, want: list[str]) -> list[str]:
    known = {*want, "NAME", "AGE", "RESULTS"}
    problems = []
    for m in LISTING.finditer(text):
        listed = m.group("a") if m.group("a") is not None else m.group("b")
        words = [w for w in re.findall(r"[A-Za-z]+", listed) if w.upper() in known]
        named = [w.upper() for w in words if w.upper() in want]
        if len(words) < 3:
            continue  # (a comment naming a column or two, `# PHASE Completed`, lists none)
        if named != want:
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{doc}:{line}: lists {named}, kubectl shows {want}")
    return problems


def documents() -> list[str]:
    found = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / NOTES]
    return [p.relative_to(REPO).as_posix() for p in found]


def test_every_listing_of_the_columns_is_kubectls() -> None:
    want = columns()
    assert want[:2] == ["PHASE", "WORKERS"] and "ETA" in want  # (the CRD was read)
    texts = {doc: (REPO / doc).read_text() for doc in documents()}
    assert sum(len(LISTING.findall(t)) for t in texts.values()) >= 3  # (the listings are found)
    problems = [p for doc, text in texts.items() for p in stale_listings(doc, text, want)]
    assert not problems, "\n".join(problems)


def test_a_listing_without_a_column_or_out_of_order_is_named() -> None:
    want = ["PHASE", "WORKERS", "SCALE", "ETA"]
    text = (
        "kubectl get dglj -w   # PHASE, WORKERS ready, SCALE, ETA\n"
        "kubectl get dglj -w   # PHASE, WORKERS ready, ETA\n"
        "Watch it (Phase, Scale, Workers ready, ETA) and wait\n"
        "kubectl get dglj -w   # PHASE Completed, then the logs\n"
    )
    assert stale_listings("d.md", text, want) == [
        "d.md:2: lists ['PHASE', 'WORKERS', 'ETA'], kubectl shows "
        "['PHASE', 'WORKERS', 'SCALE', 'ETA']",
        "d.md:3: lists ['PHASE', 'SCALE', 'WORKERS', 'ETA'], kubectl shows "
        "['PHASE', 'WORKERS', 'SCALE', 'ETA']",
    ]
