"""A benchmark's headline figures, kept for ``make bench``'s summary (bench/run.py): each is a
value with the baseline it is judged against, measured in the same run.

A benchmark calls :func:`record` where it prints a figure; when ``$BENCH_FIGURES`` names a file
(bench/run.py sets it), the figure is appended to it as one JSON line, else it is only printed
as usual. :func:`read` gives them back; :func:`summary_rows`, :func:`html` make the table and
the page."""

from __future__ import annotations

import html as _html
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

FIGURES_ENV = "BENCH_FIGURES"


@dataclass(frozen=True)
class Figure:
    """``value`` (in ``unit``) against ``baseline`` (same unit; None: a figure of its own)."""

    bench: str
    name: str
    value: float
    unit: str = ""
    baseline: float | None = None
    baseline_name: str = ""  # what the baseline is (e.g. "in memory", "1 node")

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.value / self.baseline


def record(
    bench: str,
    name: str,
    value: float,
    unit: str = "",
    baseline: float | None = None,
    baseline_name: str = "",
) -> Figure:
    """One figure of ``bench``, appended to ``$BENCH_FIGURES`` when it is set."""
    figure = Figure(bench, name, float(value), unit, baseline, baseline_name)
    path = os.environ.get(FIGURES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(figure)) + "\n")
    return figure


def read(path: Path) -> list[Figure]:
    """The figures appended to ``path`` (none when it does not exist)."""
    if not path.exists():
        return []
    return [Figure(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def summary_rows(figures: Iterable[Figure]) -> list[list[str]]:
    """bench, figure, value, baseline, ratio: one row per figure, in the order recorded."""
    rows = [["bench", "figure", "value", "baseline", "ratio"]]
    for f in figures:
        base = _number(f.baseline, f.unit)
        if f.baseline_name and f.baseline is not None:
            base += f" ({f.baseline_name})"
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "-"
        rows.append([f.bench, f.name, _number(f.value, f.unit), base, ratio])
    return rows


def markdown(rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _bars(figures: Sequence[Figure]) -> str:
    """An SVG of each figure's ratio to its baseline (the 1x line marked), for one bench."""
    rated = [f for f in figures if f.ratio is not None]
    if not rated:
        return ""
    width, row, left = 720, 22, 320
    top = max(max(f.ratio or 0 for f in rated), 1.0) * 1.1
    scale = (width - left - 60) / top
    height = row * len(rated) + 24
    bench = _html.escape(rated[0].bench)
    parts = [
        f'<svg class="bench" data-bench="{bench}" width="{width}" height="{height}" role="img">'
    ]
    for i, f in enumerate(rated):
        y = 4 + i * row
        w = max(1.0, (f.ratio or 0) * scale)
        label = _html.escape(f.name[:48])
        parts.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{label}</text>')
        parts.append(
            f'<rect class="ratio" data-figure="{label}" x="{left}" y="{y + 2}" '
            f'width="{w:.1f}" height="{row - 6}"/>'
        )
        parts.append(f'<text x="{left + w + 4:.1f}" y="{y + 14}">{f.ratio:.2f}x</text>')
    one = left + scale
    parts.append(f'<line x1="{one:.1f}" y1="0" x2="{one:.1f}" y2="{height - 20}"/>')
    parts.append(f'<text x="{one:.1f}" y="{height - 6}" text-anchor="middle">1x</text>')
    parts.append("</svg>")
    return "".join(parts)


def html(figures: Sequence[Figure], runs: Sequence[Sequence[str]], title: str) -> str:
    """The page: each benchmark's exit and time (``runs``: name, exit, seconds rows), the
    summary table, and per benchmark a plot of its ratios."""

    def table(rows: Sequence[Sequence[str]]) -> str:
        head = "".join(f"<th>{_html.escape(c)}</th>" for c in rows[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{_html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    plots = []
    for bench in dict.fromkeys(f.bench for f in figures):
        svg = _bars([f for f in figures if f.bench == bench])
        if svg:
            plots.append(f"<h3>{_html.escape(bench)}: ratio to its baseline</h3>{svg}")
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
        "rect{fill:#4a7ab5}line{stroke:#c33;stroke-dasharray:4}svg text{font-size:12px}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_html.escape(title)}</title>"
        f"<style>{style}</style></head><body><h1>{_html.escape(title)}</h1>"
        f"<h2>Benchmarks</h2>{table(runs)}<h2>Figures</h2>{table(summary_rows(figures))}"
        f"<h2>Plots</h2>{''.join(plots) or '<p>no figure with a baseline</p>'}</body></html>"
    )
