from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, why: str) -> None:
    """A missing prerequisite fails in CI and skips (saying why) elsewhere."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"prerequisite missing in CI: {why}")
    pytest.skip(why)


@pytest.fixture
def root_needed() -> None:
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")


def netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


@pytest.fixture
def no_leftovers(root_needed: None) -> Iterator[None]:
    """The test must leave no network namespace, link or process of dglrun behind."""
    before_ns, before_links = netns_names(), links()
    yield
    assert netns_names() - before_ns == set(), "network namespaces left behind"
    assert {x for x in links() - before_links if x.startswith(("dgl", "dgv", "dgp"))} == set()


def dglrun(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "launcher.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        cwd=REPO,
    )
