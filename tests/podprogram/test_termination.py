"""The termination message: written only where the kubelet's file exists, replacing it."""

from __future__ import annotations

from pathlib import Path

from podprogram.termination import MAX_BYTES, write_termination_message


def test_termination_message_only_where_the_file_exists(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    write_termination_message("boom", str(missing))
    assert not missing.exists()
    present = tmp_path / "present"
    present.write_text("old and longer")
    write_termination_message("boom", str(present))
    assert present.read_text() == "boom"


def test_termination_message_is_cut_to_what_the_kubelet_keeps(tmp_path: Path) -> None:
    path = tmp_path / "termination-log"
    path.write_text("")
    write_termination_message("x" * (MAX_BYTES + 10), path)
    assert path.read_text() == "x" * MAX_BYTES
