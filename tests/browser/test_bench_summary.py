"""``make bench``'s summary page (bench/support/figures.py) in chromium: a plot per benchmark
with a bar per figure that has a baseline, laid out, nothing in the console, and a figure's
name quoted as text."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.browser import open_page
from tests.support.paths import REPO
from tests.support.scripts import load

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

figures = load(REPO / "bench" / "support" / "figures.py")


def test_the_summary_page_plots_each_benchmarks_ratios(browser: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    found = [
        figures.Figure("pipeline_bench", "dglrun, 2 epochs", 12.0, "s", 10.0, "by hand"),
        figures.Figure("nodes_bench", "3 nodes", 9.2, "s", 10.4, "1 node"),
        figures.Figure("nodes_bench", "<script>alert(1)</script>", 2.0, "s", 1.0, "x"),
        figures.Figure("workqueue_bench", "rate", 6e5, "cycles/s"),  # (no baseline: no bar)
    ]
    runs = [["benchmark", "exit", "seconds"], ["pipeline_bench", "0", "300"]]
    path = tmp_path / "summary.html"
    path.write_text(figures.html(found, runs, "make bench"))
    assert open_page(browser, path) == []
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.bench")
    assert [p.get_attribute("data-bench") for p in plots] == ["pipeline_bench", "nodes_bench"]
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.bench rect.ratio")
    assert len(bars) == 3 and all(b.size["width"] >= 1 and b.size["height"] > 0 for b in bars)
    widths = {b.get_attribute("data-figure"): b.size["width"] for b in bars}
    assert widths["3 nodes"] < widths["<script>alert(1)</script>"]  # (one plot, one scale)
    assert browser.find_elements(By.TAG_NAME, "script") == []
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "1.20x" in body and "600,000 cycles/s" in body and "<script>alert(1)</script>" in body
