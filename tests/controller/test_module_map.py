"""docs/architecture.md lists every module of the controller."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_controller_module_is_in_the_architecture_doc() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text()
    modules = sorted(
        f.relative_to(REPO).as_posix()
        for f in (REPO / "controller").rglob("*.py")
        if f.name != "__init__.py" and "__pycache__" not in f.parts
    )
    missing = [m for m in modules if f"`{m}`" not in doc]
    assert not missing, f"docs/architecture.md does not list {missing}"
