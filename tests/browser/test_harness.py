"""The browser harness itself: a page's DOM as chromium built it, its console errors caught
(a page that logs one is reported), and a screenshot."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.browser import open_page

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

SVG_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>harness</title></head>
<body>
<svg xmlns="http://www.w3.org/2000/svg" width="400" height="200" viewBox="0 0 400 200">
  <rect id="a" x="10" y="10" width="100" height="80" fill="steelblue"/>
  <rect id="b" x="150" y="40" width="100" height="120" fill="darkorange"/>
  <polyline points="0,200 100,120 200,150 300,40 400,60" fill="none" stroke="black"/>
</svg>
</body>
</html>
"""


def _page(tmp_path: Path, html: str, name: str = "page.html") -> Path:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return path


def test_the_dom_is_the_pages_svg_and_the_console_is_clean(browser: Chrome, tmp_path: Path) -> None:
    errors = open_page(browser, _page(tmp_path, SVG_PAGE))
    assert errors == []
    assert browser.title == "harness"
    counts = browser.execute_script(
        "return [document.querySelectorAll('svg rect').length,"
        " document.querySelectorAll('svg polyline').length]"
    )
    assert counts == [2, 1]
    # laid out, not only parsed: the second rect's box is where its attributes put it
    box = browser.execute_script(
        "const r = document.getElementById('b').getBBox(); return [r.x, r.y, r.width, r.height]"
    )
    assert box == [150, 40, 100, 120]


def test_a_console_error_is_reported(browser: Chrome, tmp_path: Path) -> None:
    """The refusal: a page that logs an error is caught, so a clean console means one."""
    page = _page(tmp_path, '<!DOCTYPE html><title>x</title><script>console.error("boom")</script>')
    errors = open_page(browser, page)
    assert len(errors) == 1, errors
    assert errors[0]["level"] == "SEVERE" and "boom" in errors[0]["message"]
    # the entries were drained: the next page does not inherit them
    assert open_page(browser, _page(tmp_path, SVG_PAGE, "clean.html")) == []


def test_a_screenshot_is_a_png_of_the_window(browser: Chrome, tmp_path: Path) -> None:
    assert open_page(browser, _page(tmp_path, SVG_PAGE)) == []
    shot = tmp_path / "shot.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert len(data) > 0 and data.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", data[16:24])  # IHDR, the first chunk
    assert width == 1280 and height > 0  # the viewport of --window-size=1280,2000
