"""A real HTTP server on 127.0.0.1 serving a stand-in kubectl, with scriptable failures
(:class:`Server`, started by :func:`serving`)."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GIT_VERSION = "v1.34.1"
# Prints what `kubectl version --client -o json` prints, and fails for anything else.
FAKE_KUBECTL = b"""#!/bin/sh
if [ "$*" = "version --client -o json" ]; then
  echo '{"clientVersion": {"gitVersion": "v1.34.1", "platform": "linux/amd64"}}'
  exit 0
fi
echo "fake kubectl: unexpected arguments: $*" >&2
exit 1
"""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Server:
    """Serves ``files`` by path. The first ``fail_first`` requests fail as ``fail_mode`` says:
    ``503``, ``429`` (with ``retry_after``), ``reset`` (TCP RST before any answer),
    ``truncate`` (half the body, then close) or ``stall`` (no answer until released)."""

    files: dict[str, bytes] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)  # path -> error status to answer
    fail_first: int = 0
    fail_mode: str = "503"
    retry_after: str | None = None
    requests: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/kubectl") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def next_request(self, path: str) -> int:
        with self._lock:
            self.requests.append(path)
            return len(self.requests)


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            n = server.next_request(self.path)
            if n <= server.fail_first:
                mode = server.fail_mode
                if mode == "503":
                    self._send(503, b"busy\n")
                elif mode == "429":
                    headers = {"Retry-After": server.retry_after} if server.retry_after else {}
                    self._send(429, b"slow down\n", headers)
                elif mode == "reset":
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                elif mode == "truncate":
                    full = server.files.get(self.path, b"")
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(full)))
                    self.end_headers()
                    self.wfile.write(full[: len(full) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                elif mode == "stall":
                    server.release.wait(10)
                    self.close_connection = True
                else:
                    raise AssertionError(mode)
                return
            if self.path in server.statuses:
                self._send(server.statuses[self.path], b"no\n")
                return
            if self.path in server.redirects:
                self._send(302, b"", {"Location": server.redirects[self.path]})
                return
            body = server.files.get(self.path)
            if body is None:
                self._send(404, b"not found\n")
                return
            self._send(200, body, {"Content-Type": "application/octet-stream"})

    return Handler


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the scripted resets and truncations make the handler's socket writes fail


@contextlib.contextmanager
def serving(srv: Server) -> Iterator[Server]:
    """``srv`` answering on a free loopback port until the block ends."""
    httpd = _HTTPServer(("127.0.0.1", 0), _handler(srv))
    srv.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
