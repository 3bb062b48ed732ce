"""The private containerd fixture removes what killed sessions left behind, and only that."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.images.containerd import PREFIX, sweep_stale


def test_sweep_removes_dead_sessions_and_keeps_live_ones(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}dead"
    (dead / "root" / "snapshots").mkdir(parents=True)
    (dead / "root" / "snapshots" / "layer").write_bytes(b"x" * 1024)
    (dead / "containerd.sock").touch()  # a socket file no daemon listens on any more
    live = tmp_path / f"{PREFIX}live"
    live.mkdir()
    other = tmp_path / "not-ours"
    other.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(live / "containerd.sock"))
        listener.listen(1)
        removed = sweep_stale(tmp_path)
    finally:
        listener.close()
    assert removed == [dead]
    assert not dead.exists()
    assert live.is_dir() and other.is_dir()
