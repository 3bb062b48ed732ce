"""Chromium in tests: :func:`running_browser` starts Debian's chromium, headless, driven by
selenium through Debian's chromedriver (both declared in hack/prereqs.py, the ``test-browser``
entry point, and found or installed by hack/tools.sh; selenium comes with the venv, setup.cfg's
``dev`` extra); :func:`open_page` loads a local HTML file (a page ``dglctl report`` writes) and
returns the errors its console logged. The ``browser`` fixtures of tests/browser and e2e start
one each.

In CI (CI=true) a missing browser, driver or selenium fails the tests that need it; elsewhere
they are skipped with what is missing and the command that installs it
(tests/support/prerequisites.py).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tests.support.prerequisites import unavailable
from tests.support.tools import tool_paths

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

# a self-contained page on the local disk is complete well within this
LOAD_SECONDS = 30.0
OPTIONS = (
    "--headless=new",
    "--no-sandbox",  # root, and no user namespaces in a container
    "--disable-gpu",
    "--disable-dev-shm-usage",  # /dev/shm may be small (a container's 64 MB)
    "--window-size=1280,2000",
)


@contextlib.contextmanager
def running_browser() -> Iterator[Chrome]:
    """One headless chromium, its console logged at every level (read with
    ``browser.get_log("browser")``, or through :func:`open_page`); quit at the end."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        unavailable(
            f"selenium is not installed in {sys.executable} ({e}): "
            "`make venv` (pip install -e '.[dev]') installs it"
        )
    paths = tool_paths("chromium", "chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = str(paths["chromium"])
    for option in OPTIONS:
        options.add_argument(option)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(
            options=options, service=Service(executable_path=str(paths["chromedriver"]))
        )
    except WebDriverException as e:
        unavailable(
            f"chromium ({paths['chromium']}) did not start under chromedriver "
            f"({paths['chromedriver']}): {e.msg or e}"
        )
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(browser: Chrome) -> list[dict[str, Any]]:
    """The console entries of level SEVERE logged since the last read (reading drains them):
    ``console.error``, an uncaught exception, a resource that failed to load."""
    entries = cast(list[dict[str, Any]], browser.get_log("browser"))  # type: ignore[no-untyped-call]
    return [e for e in entries if e.get("level") == "SEVERE"]


def open_page(browser: Chrome, path: Path) -> list[dict[str, Any]]:
    """Load ``path`` as a ``file://`` URL, wait until ``document.readyState`` is
    ``complete``, and return the SEVERE console entries the page logged (what an earlier
    page logged is dropped first)."""
    from selenium.webdriver.support.ui import WebDriverWait

    console_errors(browser)
    browser.get(path.resolve().as_uri())
    WebDriverWait(browser, LOAD_SECONDS).until(
        lambda d: d.execute_script("return document.readyState") == "complete",
        f"{path} did not finish loading in {LOAD_SECONDS:.0f} s",
    )
    return console_errors(browser)
