"""hack/flake_hunt.py: the JUnit reports of several runs read, and the tests that failed in
some run listed with their failures; its exit says whether any did."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.scripts import load

flake_hunt = load(REPO / "hack" / "flake_hunt.py")
LAYERS, read_junit, table, tally = (
    flake_hunt.LAYERS, flake_hunt.read_junit, flake_hunt.table, flake_hunt.tally
)  # fmt: skip


def report(*cases: str) -> str:
    return f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>'


def case(name: str, inner: str = "") -> str:
    return f'<testcase classname="tests.apiserver.test_x" name="{name}">{inner}</testcase>'


def test_a_test_that_failed_in_one_run_of_three_is_listed_with_its_failure() -> None:
    failed = case("test_b", '<failure message="AssertionError: 409 Conflict">trace</failure>')
    errored = case("test_c", '<error message="fixture broke&#10;second line">x</error>')
    runs = [
        read_junit(report(case("test_a"), case("test_b"), case("test_c"))),
        read_junit(report(case("test_a"), failed, errored)),
        read_junit(report(case("test_a"), case("test_b"), case("test_c", "<skipped/>"))),
    ]
    tallies = tally(runs)
    assert tallies["tests.apiserver.test_x::test_a"].failed == 0
    b = tallies["tests.apiserver.test_x::test_b"]
    assert (b.runs, b.failed, b.failures) == (3, 1, {"failure: AssertionError: 409 Conflict": 1})
    lines = table(tallies, 3)
    assert lines[0] == "flake-hunt: 3 run(s), 3 test(s), 2 failed at least once"
    assert "  1/3  tests.apiserver.test_x::test_b" in lines
    assert "        1x error: fixture broke" in lines  # (a failure's first line only)
    assert not any("test_a" in line for line in lines)


def test_no_failure_lists_nothing() -> None:
    tallies = tally([read_junit(report(case("test_a")))] * 2)
    assert table(tallies, 2) == ["flake-hunt: 2 run(s), 1 test(s), 0 failed at least once"]


def test_the_layers_are_folders_and_files_of_this_checkout() -> None:
    for paths in LAYERS.values():
        for path in paths:
            assert (REPO / path).exists(), path


def test_it_runs_pytest_n_times_and_exits_1_on_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of a folder holding one passing and one failing test (the real pytest, a
    layer of this test's own)."""
    layer = tmp_path / "layer"
    layer.mkdir()
    (layer / "test_some.py").write_text(
        "def test_passes():\n    assert True\n\n"
        "def test_fails():\n    assert 1 == 2, 'one is not two'\n"
    )
    monkeypatch.setitem(LAYERS, "fake-api", (str(layer),))
    out = tmp_path / "reports"
    code = flake_hunt.main(["--runs", "2", "--layer", "fake-api", "--out", str(out)])
    assert code == 1
    assert sorted(p.name for p in out.iterdir()) == ["run-01.xml", "run-02.xml"]
    tallies = tally(read_junit(p.read_text()) for p in sorted(out.iterdir()))
    (failing,) = [t for name, t in tallies.items() if name.endswith("::test_fails")]
    assert failing.failed == 2 and "one is not two" in next(iter(failing.failures))
