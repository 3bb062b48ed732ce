"""localcluster.ports: servers' ports picked where no process's own bind(0) or connection
takes one (the CI failure `cannot listen on 0.0.0.0:41601`)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from localcluster import ports


def test_a_port_is_below_the_ephemeral_range_free_and_never_given_twice() -> None:
    low, high = ports.ephemeral_range()
    assert 1024 < low <= high
    picked = [ports.free_port() for _ in range(300)]
    assert len(set(picked)) == 300  # never twice in a process
    assert all(ports.FLOOR <= p < min(low, ports.CEILING) for p in picked)
    with socket.socket() as s:  # each one free: a server may bind it
        s.bind(("0.0.0.0", picked[-1]))
    # what the kernel gives by itself lies in the range the picks avoid
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert low <= s.getsockname()[1] <= high


def test_a_port_a_socket_holds_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken, socket.socket() as spare:
        taken.bind(("127.0.0.1", 0))  # (one address: the check binds the wildcard)
        spare.bind(("127.0.0.1", 0))
        busy, free = taken.getsockname()[1], spare.getsockname()[1]
        spare.close()
        offered = iter([busy, free])
        monkeypatch.setattr(ports._random, "randrange", lambda a, b: next(offered))
        assert ports.free_port() == free


def test_a_range_with_no_room_below_it_is_one_clear_error(tmp_path: Path) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text("20500\t60999\n")
    with pytest.raises(RuntimeError, match=r"ip_local_port_range: the ephemeral range starts at"):
        ports.free_port(narrow)
    narrow.write_text("garbage\n")  # unreadable: Linux's default range
    assert ports.ephemeral_range(narrow) == (32768, 60999)
