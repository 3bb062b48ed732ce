"""The report as one self-contained HTML page: no script, no file or address outside it (the
timeline and the memory plot are inline SVG). :func:`page` draws :class:`Readings`;
:func:`svg_timeline` and :func:`svg_memory` are also what ``make demo-large`` draws its own
samples with.

In the page, every bar of the timeline is a ``rect.bar`` with ``data-row`` (the pod and its
attempt, or ``job``) and ``data-step``; every pod's memory a ``polyline.pod`` with
``data-pod``; the plan's and the limit's lines ``line.plan`` and ``line.limit``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from dgl_operator.report.readings import Bar, Mark, Readings, Series
from dgl_operator.units import size

COLORS = {
    "queued": "#bbbbbb",
    "suspended": "#888888",
    "pending": "#cccccc",
    "running": "#7a9cc6",
    "generate": "#8e6c8a",
    "1/5 partition": "#e07b39",
    "2/5 deliver": "#e0a339",
    "3/5 dispatch": "#d8c03a",
    "4/5 configure": "#9bbf3a",
    "evaluate": "#4e9a06",
    "powered off": "#cc0000",
}
FONT = 'font-family="sans-serif" font-size="11"'
STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px}"
    "th{background:#f0f0f0}.Warning{color:#a00}.note{color:#a60}"
)


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def color(what: str) -> str:
    if what.startswith("train"):
        m = re.search(r"epoch (\d+)", what)
        shade = 40 + 12 * (int(m.group(1)) % 4 if m else 0)
        return f"hsl(210, 60%, {shade}%)"
    if what.startswith("new attempt"):
        return "#d46a6a"
    return COLORS.get(what, "#999999")


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


def svg_timeline(bars: list[Bar], marks: Iterable[Mark] = (), width: int = 1060) -> str:
    """One row per pod and attempt (and the job's own), a bar per step; marks as dashed lines."""
    rows = list(dict.fromkeys(b.row for b in bars))
    marks = list(marks)
    end = max([b.end for b in bars] + [m.t for m in marks] + [1.0])
    left, h = 230, 22
    scale = (width - left - 10) / end
    out = [f'<svg id="timeline" width="{width}" height="{(len(rows) + 2) * h + 10}" {FONT}>']
    for i, row in enumerate(rows):
        out.append(f'<text x="4" y="{i * h + 15}">{esc(row)}</text>')
    for b in bars:
        y = rows.index(b.row) * h
        x, w = left + b.start * scale, max(1.0, (b.end - b.start) * scale)
        out.append(
            f'<rect class="bar" data-row="{esc(b.row)}" data-step="{esc(b.what)}" x="{x:.1f}" '
            f'y="{y + 3}" width="{w:.1f}" height="{h - 6}" fill="{color(b.what)}"><title>'
            f"{esc(b.row)}: {esc(b.what)}, {clock(b.start)} to {clock(b.end)} "
            f"({b.end - b.start:.0f}s)</title></rect>"
        )
        if w > 7 * len(b.what):
            out.append(f'<text x="{x + 3:.1f}" y="{y + 15}" fill="white">{esc(b.what)}</text>')
    for m in marks:
        x = left + m.t * scale
        out.append(
            f'<line class="mark" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{len(rows) * h}" '
            f'stroke="#cc0000" stroke-dasharray="4,3"><title>{clock(m.t)} {esc(m.what)}</title>'
            "</line>"
        )
    y = len(rows) * h + 16
    step = max(10, int(end / 10) // 10 * 10 or 10)
    for s in range(0, int(end) + 1, step):
        out.append(f'<text x="{left + s * scale:.1f}" y="{y}">{clock(s)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def svg_memory(
    series: list[Series],
    plan: dict[str, float],
    limit: float,
    width: int = 1060,
    peaks: dict[str, float] | None = None,
) -> str:
    """Each pod's memory over time (MiB); the plan's estimates and the limit as dashed lines,
    the peaks dglrun measured per step (``peaks``) dotted."""
    peaks = peaks or {}
    height, left = 320, 60
    drawn = [s for s in series if s.samples]
    end = max([s.samples[-1][0] for s in drawn] + [1.0])
    highest = [max(v for _, v in s.samples) for s in drawn]
    top = max([limit, *plan.values(), *peaks.values(), *highest, 1.0])
    sx, sy = (width - left - 160) / end, (height - 30) / (top * 1.05)
    base = height - 20

    def y_of(mib: float) -> str:
        return f"{base - mib * sy:.1f}"

    out = [f'<svg id="memory" width="{width}" height="{height + 20}" {FONT}>']
    unit = 1024 if top > 2048 else 256
    for mark in range(0, int(top / unit) + 1):
        grid = mark * unit
        out.append(
            f'<line x1="{left}" y1="{y_of(grid)}" x2="{width}" y2="{y_of(grid)}" stroke="#eee"/>'
        )
        label = f"{grid // 1024} GiB" if unit == 1024 else f"{grid} MiB"
        out.append(f'<text x="4" y="{y_of(grid)}">{label}</text>')
    hues = [0, 120, 240, 30, 180, 300, 60, 270, 90]
    for n, s in enumerate(sorted(drawn, key=lambda s: s.pod)):
        pts = " ".join(f"{left + t * sx:.1f},{y_of(v)}" for t, v in s.samples)
        c = f"hsl({hues[n % len(hues)]},70%,40%)"
        out.append(
            f'<polyline class="pod" data-pod="{esc(s.pod)}" points="{pts}" fill="none" '
            f'stroke="{c}" stroke-width="1.5"><title>{esc(s.pod)}</title></polyline>'
        )
        last_t, last_v = s.samples[-1]
        out.append(
            f'<text x="{left + last_t * sx + 3:.1f}" y="{y_of(last_v)}" fill="{c}">'
            f"{esc(s.pod)}</text>"
        )
    lines = [(w, m, "plan") for w, m in plan.items()] + [("limit", limit, "limit")]
    lines += [(w, m, "peak") for w, m in peaks.items()]
    for what, mib, kind in lines:
        if mib <= 0:
            continue
        dash = "2,3" if kind == "peak" else "6,4"
        out.append(
            f'<line class="{kind}" x1="{left}" y1="{y_of(mib)}" x2="{width}" y2="{y_of(mib)}" '
            f'stroke="#555" stroke-dasharray="{dash}"/>'
        )
        out.append(f'<text x="{left + 4}" y="{y_of(mib)}">{esc(what)} {mib:.0f} MiB</text>')
    out.append("</svg>")
    return "\n".join(out)


def table(head: list[str], rows: Iterable[Iterable[object]]) -> str:
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def page(r: Readings, refresh: int = 0, written: str = "") -> str:
    """The whole report; ``refresh``: seconds after which the browser loads it again
    (``dglctl report --watch`` rewrites it)."""
    plan = {
        f"plan: {k}": float(v.get("estimateMiB") or 0)
        for k, v in r.plan.items()
        if v.get("estimateMiB")
    }
    peaks = {
        f"measured: {k}": float(v.get("peakMiB") or 0)
        for k, v in r.plan.items()
        if v.get("peakMiB")
    }
    head = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>DGLJob {esc(r.namespace)}/{esc(r.name)}</title>",
        f"<meta http-equiv='refresh' content='{refresh}'>" if refresh else "",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>DGLJob {esc(r.namespace)}/{esc(r.name)}: {esc(r.phase)}"
        + (f" ({esc(r.ended)})" if r.ended and r.ended != r.phase else "")
        + "</h1>",
    ]
    facts = [("progress", r.progress), ("message", r.message)]
    facts += [(k, f"{v:g}" if isinstance(v, float) else v) for k, v in r.metrics.items()]
    if written:
        facts.append(("written", written + (" (refreshed while the job runs)" if refresh else "")))
    body = [table(["", ""], [(k, v) for k, v in facts if v not in ("", None)])]
    body += [f"<p class='note'>{esc(n)}</p>" for n in r.notes]
    body.append(
        "<h2>Timeline</h2><p>Seconds from the job's creation; a row per pod and "
        "attempt, dashed lines: the operator's Events (hover for each).</p>"
    )
    body.append(svg_timeline(r.bars, r.marks))
    body.append(
        "<h2>Memory per pod</h2><p>What each pod's processes hold (anon + shmem of its "
        "memory cgroup, sampled by dglrun); dashed: dglrun's plan and the memory limit; "
        "dotted: the peaks dglrun measured per step.</p>"
    )
    if any(s.samples for s in r.memory):
        body.append(svg_memory(r.memory, plan, r.limit, peaks=peaks))
    else:
        body.append("<p>No memory samples in the logs read (yet).</p>")
    if r.plan:
        body.append("<h3>The memory plan</h3>")
        body.append(
            table(
                ["step", "estimate (MiB)", "measured peak (MiB)", "limit (MiB)"],
                [
                    (k, v.get("estimateMiB", "-"), v.get("peakMiB", "-"), v.get("limitMiB", "-"))
                    for k, v in r.plan.items()
                ],
            )
        )
    body.append("<h2>Steps</h2>")
    body.append(table(["step", "attempt", "seconds"], [(s, a, f"{t:.1f}") for s, a, t in r.steps]))
    prof = r.profile
    if prof.peak or prof.seconds:
        body.append(f"<h3>Partition, per step of the ranks</h3><p>{esc(prof.cut)}</p>")
        names = list(dict.fromkeys([*prof.peak, *prof.seconds]))
        body.append(
            table(
                ["step", "seconds", "peak per rank (MiB)", "sent to the other ranks (MiB)"],
                [
                    (
                        n,
                        f"{prof.seconds[n]:.1f}" if n in prof.seconds else "-",
                        " / ".join(f"{x:.0f}" for x in prof.peak.get(n, [])) or "-",
                        " / ".join(f"{x:.0f}" for x in prof.sent.get(n, [])) or "-",
                    )
                    for n in names
                ],
            )
        )
    body.append("<h2>Bytes moved</h2>")
    body.append(
        table(["what", "bytes"], [(w, size(b)) for w, b in r.moved])
        if r.moved
        else "<p>None reported.</p>"
    )
    body.append("<h2>Events</h2>")
    body.append(
        table(
            ["time", "type", "reason", "object", "message"],
            [(clock(t), ty, re_, obj, msg) for t, ty, re_, obj, msg in r.events],
        ).replace("<td>Warning</td>", "<td class='Warning'>Warning</td>")
    )
    return "\n".join([*head, *body, "</body></html>"])
