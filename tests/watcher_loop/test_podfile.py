"""Parsing and reading the pod files (hostfile, partfile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from watcher_loop.podfile import PodFileError, parse_pod_file, read_pod_file


def test_hostfile_lines_give_the_third_column_in_order() -> None:
    text = (
        "10.0.0.1 30050 job-worker-0 slots=4\n"
        "10.0.0.2 30050 job-worker-1 slots=4\n"
        "10.0.0.3 30050 job-worker-10 slots=4\n"
    )
    assert parse_pod_file(text) == ["job-worker-0", "job-worker-1", "job-worker-10"]


def test_partfile_line_without_slots() -> None:
    assert parse_pod_file("10.0.0.9 30050 job-partitioner\n") == ["job-partitioner"]


def test_ipv6_tabs_and_no_trailing_newline() -> None:
    assert parse_pod_file("fd00::1\t30050\tjob-worker-0  slots=2") == ["job-worker-0"]


def test_blank_and_comment_lines_are_skipped() -> None:
    text = "\n# written by the operator\n   \n  # indented comment\n10.0.0.1 30050 w-0\n\n"
    assert parse_pod_file(text) == ["w-0"]


def test_names_ending_in_launcher_are_ignored() -> None:
    text = "10.0.0.1 30050 job-launcher\n10.0.0.2 30050 w-0\n10.0.0.3 30050 otherlauncher\n"
    assert parse_pod_file(text) == ["w-0"]


def test_empty_text_lists_nothing() -> None:
    assert parse_pod_file("") == []
    assert parse_pod_file("\n# nothing yet\n") == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("10.0.0.1 30050", "got 2 column(s)"),
        ("job-worker-0", "got 1 column(s)"),
        ("10.0.0.1 30050 w-1 slots=1 extra", "got 5 column(s)"),
        (" 30050 w-1 slots=1", "'30050' is not an IP address"),  # a pod without an IP
        ("10.0.0.1 http w-1", "'http' is not a port number"),
        ("10.0.0.1 70000 w-1", "'70000' is not a port number"),
        ("10.0.0.1 0 w-1", "'0' is not a port number"),
        ("10.0.0.1 30050 Worker_1", "'Worker_1' is not a pod name"),
        ("10.0.0.1 30050 " + "w" * 64, "is not a pod name"),
        ("10.0.0.1 30050 w-1 slots=0", "expected slots=<positive integer>, got 'slots=0'"),
        ("10.0.0.1 30050 w-1 4", "expected slots=<positive integer>, got '4'"),
    ],
)
def test_malformed_line_names_file_and_line(line: str, problem: str) -> None:
    text = f"# header\n10.0.0.9 30050 w-0 slots=1\n{line}\n"
    with pytest.raises(PodFileError) as err:
        parse_pod_file(text, "/etc/dgl/hostfile")
    message = str(err.value)
    assert message.startswith("/etc/dgl/hostfile line 3: "), message
    assert problem in message
    assert repr(line.strip()) in message


def test_a_pod_listed_twice_is_malformed() -> None:
    text = "10.0.0.1 30050 w-0\n10.0.0.2 30050 w-1\n10.0.0.3 30050 w-0\n"
    with pytest.raises(PodFileError, match=r"f line 3: pod w-0 is already listed on line 1"):
        parse_pod_file(text, "f")


def test_read_missing_file_is_incomplete(tmp_path: Path) -> None:
    found = read_pod_file(tmp_path / "hostfile", 2)
    assert (found.names, found.complete) == ([], False)
    assert "does not exist" in found.why


def test_read_empty_file_is_incomplete_even_without_expected_count(tmp_path: Path) -> None:
    f = tmp_path / "hostfile"
    f.write_text("")
    found = read_pod_file(f)
    assert not found.complete
    assert "lists no pods" in found.why


def test_read_file_with_only_a_launcher_is_incomplete(tmp_path: Path) -> None:
    f = tmp_path / "leadfile"
    f.write_text("10.0.0.1 30050 job-launcher\n")
    assert not read_pod_file(f).complete


def test_read_short_file_is_incomplete(tmp_path: Path) -> None:
    f = tmp_path / "hostfile"
    f.write_text("10.0.0.1 30050 w-0 slots=1\n")
    found = read_pod_file(f, 2)
    assert (found.names, found.complete, found.why) == (
        ["w-0"],
        False,
        "the file lists 1 of 2 pods",
    )


def test_read_complete_file(tmp_path: Path) -> None:
    f = tmp_path / "hostfile"
    f.write_text("10.0.0.1 30050 w-0 slots=1\n10.0.0.2 30050 w-1 slots=1\n")
    assert read_pod_file(f, 2).complete
    assert read_pod_file(f, None).complete
    found = read_pod_file(f, 1)  # more than expected: complete, every pod is waited for
    assert (found.names, found.complete) == (["w-0", "w-1"], True)


def test_read_malformed_file_raises(tmp_path: Path) -> None:
    f = tmp_path / "hostfile"
    f.write_text("10.0.0.1 30050\n")
    with pytest.raises(PodFileError, match=rf"{f} line 1: "):
        read_pod_file(f, 1)


def test_unreadable_file_raises(tmp_path: Path) -> None:
    with pytest.raises(PodFileError, match=rf"cannot read {tmp_path}"):
        read_pod_file(tmp_path, 1)  # a directory
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PodFileError, match="is not a text file"):
        read_pod_file(binary, 1)
