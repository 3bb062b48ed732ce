"""localcluster.kueue.start refuses when another Kueue manager answers on this host's ports: a
manager it started could not bind them, and the one answering serves another API server (a
flake-hunt run beside an e2e session once saw no job admitted for that)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import kueue
from localcluster.cluster import ClusterError


class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def another_manager() -> Iterator[None]:
    """Something answering /readyz on Kueue's health port (a real manager, if one runs)."""
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", kueue.HEALTH_PORT), Ready)
    except OSError:  # (one answers there already)
        yield
        return
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def test_start_refuses_when_another_manager_answers(tmp_path: Path) -> None:
    def kubectl(args: list[str], stdin: str | None) -> str:
        raise AssertionError(f"nothing is installed when it refuses: kubectl {args}")

    with another_manager():
        assert kueue.running()
        with pytest.raises(ClusterError, match=f"already answers on 127.0.0.1:{kueue.HEALTH_PORT}"):
            kueue.start(tmp_path, tmp_path / "kubeconfig", kubectl)
