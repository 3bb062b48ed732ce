"""``dglctl report``'s page in chromium: the timeline and the memory plot as the browser lays
them out, nothing in the console, and what the page quotes (an Event's message) never runs.
(e2e/test_storage.py opens the report of a real job the same way.)"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dgl_operator.report.page import page
from tests.support.browser import open_page
from tests.support.reports import readings

if TYPE_CHECKING:
    from selenium.webdriver import Chrome


def test_the_report_shows_a_bar_per_pod_step_and_a_line_per_pods_memory(
    browser: Chrome, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    r = readings()
    path = tmp_path / "cut-report.html"
    path.write_text(page(r))
    assert open_page(browser, path) == []
    bars = browser.find_elements(By.CSS_SELECTOR, "svg#timeline rect.bar")
    shown = [(b.get_attribute("data-row"), b.get_attribute("data-step")) for b in bars]
    assert sorted(shown) == sorted((b.row, b.what) for b in r.bars)
    assert len(shown) == len(set(shown))  # one bar per pod (and attempt) and step
    assert all(b.size["width"] >= 1 and b.size["height"] > 0 for b in bars)
    lines = browser.find_elements(By.CSS_SELECTOR, "svg#memory polyline.pod")
    assert sorted(x.get_attribute("data-pod") or "" for x in lines) == sorted(
        s.pod for s in r.memory
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg#memory line.limit")) == 1
    # the Event's "<script>alert(1)</script>" is text on the page, not a script
    assert browser.find_elements(By.TAG_NAME, "script") == []
    assert "<script>alert(1)</script> lost" in browser.find_element(By.TAG_NAME, "body").text
