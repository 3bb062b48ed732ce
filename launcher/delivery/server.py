"""Serve a partition set to the workers (the wire contract is in :mod:`launcher.delivery.wire`).

Files go out with ``sendfile`` (no copy through Python); only files named in the manifest are
served, so a request cannot reach anything else on the pod. The server stops when a client
posts ``/v1/done`` or when :meth:`PartitionServer.wait_done` times out.

Anybody who reaches the port can open connections: at most ``max_connections`` are served at
once (each has a thread; the others are closed at once), and one that sends or reads nothing
for ``idle_timeout`` seconds is closed, so that nobody can hold the server's threads.
"""

from __future__ import annotations

import hmac
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from launcher import programs
from launcher.delivery.wire import TransferError
from podcontract import TRANSFER_PORT, TRANSFER_READY_PATH, TRANSFER_TOKEN_PATH

_RANGE = re.compile(r"^bytes=(\d+)-$")
Tamper = Callable[[str, bytes], bytes]  # (rel, data) -> data sent instead (tests only)
# Each worker's puller holds one connection at a time (and the kubelet's readiness probe one):
# a few hundred workers at most
MAX_CONNECTIONS = 256
IDLE_TIMEOUT = 60.0  # seconds a connection may send or read nothing


class _BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that serves at most ``slots`` connections at once: one more is
    closed as soon as it is accepted (no thread, no reply)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, slots: int) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        super().__init__(address, handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        return self._slots.acquire(blocking=False)

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # (no thread took the slot)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


@dataclass
class ServerStats:
    bytes_sent: int = 0
    peers: set[str] = field(default_factory=set)
    complete: set[str] = field(default_factory=set)  # files sent to their last byte
    told_done: bool = False  # a client posted /v1/done (else: timed out, all served)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, peer: str, rel: str, n: int, to_the_end: bool) -> None:
        with self.lock:
            self.bytes_sent += n
            self.peers.add(peer)
            if to_the_end:
                self.complete.add(rel)


class PartitionServer:
    def __init__(
        self,
        root: Path,
        manifest: dict[str, Any],
        token: str,
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        max_rate: float = 0.0,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        tamper: Tamper | None = None,
    ) -> None:
        self.root = root
        self.manifest = manifest
        self.token = token
        self.stats = ServerStats()
        self.done = threading.Event()
        self._tamper = tamper
        self.max_rate = max_rate  # bytes/s per connection; 0: as fast as the network goes
        self._body = json.dumps(manifest).encode()
        self.idle_timeout = idle_timeout
        try:
            self._httpd = _BoundedServer((host, port), self._handler(), max_connections)
        except OSError as e:
            raise TransferError(f"cannot listen on {host}:{port}: {e.strerror}") from e
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> PartitionServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="partition-server", daemon=True
        )
        self._thread.start()
        return self

    def wait_done(self, timeout: float | None) -> bool:
        """Block until a client posted ``/v1/done`` (True). After ``timeout`` s without it:
        False if every file was served to its last byte at least once (the launcher's word
        was lost, the parts were not), else TransferError."""
        if self.done.wait(timeout):
            return True
        if set(self.manifest["files"]) <= self.stats.complete:
            return False
        raise TransferError(
            f"no launcher reported the workers' parts delivered within {timeout:.0f}s "
            f"({self.stats.bytes_sent / 1e6:.1f} MB served to {len(self.stats.peers)} peers)"
        )

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> PartitionServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class PartitionRequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = server.idle_timeout  # (the socket's: a silent peer is dropped)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the launcher reports progress

            def _reply(
                self, status: HTTPStatus, body: bytes = b"", ctype: str = "text/plain"
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body and self.command != "HEAD":
                    self.wfile.write(body)

            def _authorized(self) -> bool:
                given = self.headers.get("Authorization") or ""
                want = f"Bearer {server.token}"
                if hmac.compare_digest(given.encode(), want.encode()):
                    return True
                self._reply(HTTPStatus.UNAUTHORIZED, b"missing or wrong transfer token\n")
                return False

            def do_GET(self) -> None:
                path = urllib.parse.urlsplit(self.path).path
                if path == TRANSFER_READY_PATH:
                    self._reply(HTTPStatus.OK, b"serving\n")
                    return
                if not self._authorized():
                    return
                if path == "/v1/manifest":
                    self._reply(HTTPStatus.OK, server._body, "application/json")
                elif path.startswith("/v1/files/"):
                    self._file(urllib.parse.unquote(path[len("/v1/files/") :]))
                else:
                    self._reply(HTTPStatus.NOT_FOUND, b"no such endpoint\n")

            def do_POST(self) -> None:
                if not self._authorized():
                    return
                if urllib.parse.urlsplit(self.path).path == "/v1/done":
                    self._reply(HTTPStatus.OK, b"stopping\n")
                    server.done.set()
                else:
                    self._reply(HTTPStatus.NOT_FOUND, b"no such endpoint\n")

            def _file(self, rel: str) -> None:
                entry = server.manifest["files"].get(rel)
                if entry is None:
                    self._reply(HTTPStatus.NOT_FOUND, f"{rel} is not served\n".encode())
                    return
                size = int(entry["size"])
                start = 0
                wanted = self.headers.get("Range")
                if wanted:
                    m = _RANGE.match(wanted.strip())
                    if not m or int(m.group(1)) > size:
                        self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    start = int(m.group(1))
                count = size - start
                self.send_response(HTTPStatus.PARTIAL_CONTENT if wanted else HTTPStatus.OK)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(count))
                if wanted:
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                self.end_headers()
                self.wfile.flush()
                sent = count
                with open(server.root / rel, "rb") as f:
                    if server._tamper is not None:
                        f.seek(start)
                        data = server._tamper(rel, f.read(count))
                        self.wfile.write(data)
                        sent = len(data)
                        if sent < count:
                            self.close_connection = True  # a dropped connection
                    elif server.max_rate > 0:
                        _paced(self.connection, f, start, count, server.max_rate)
                    elif count:
                        self.connection.sendfile(f, start, count)
                server.stats.add(self.client_address[0], rel, sent, start + sent == size)

        return PartitionRequestHandler


def _paced(conn: Any, f: Any, start: int, count: int, rate: float) -> None:
    """sendfile in slices, sleeping so that the connection averages ``rate`` bytes/s."""
    began = time.monotonic()
    sent = 0
    step = max(64 * 1024, int(rate / 10))
    while sent < count:
        sent += conn.sendfile(f, start + sent, min(step, count - sent))
        ahead = sent / rate - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)


def serve_and_wait(
    root: Path,
    manifest: dict[str, Any],
    token: str,
    *,
    port: int,
    timeout: float | None,
    max_rate: float = 0.0,
    on_start: Callable[[PartitionServer], None] = lambda _s: None,
) -> ServerStats:
    """Serve until the launcher says every worker has its part (or ``timeout``)."""
    with PartitionServer(root, manifest, token, port=port, max_rate=max_rate) as server:
        on_start(server)
        server.stats.told_done = server.wait_done(timeout)
    return server.stats


def main(argv: list[str] | None = None) -> int:
    """``python -m launcher.delivery.server``: serve a partition set until ``/v1/done``
    (``--transport local`` runs it in the launcher's network namespace)."""
    import argparse

    from launcher.delivery.wire import build_manifest, read_token
    from launcher.partition import output as parts

    ap = argparse.ArgumentParser(prog=programs.prog(programs.SERVE))
    ap.add_argument("--config", required=True, help="the partition config (<graph>.json)")
    ap.add_argument("--port", type=int, default=TRANSFER_PORT)
    ap.add_argument("--token-file", default=TRANSFER_TOKEN_PATH)
    ap.add_argument("--timeout", type=float, default=0.0, help="seconds (0 = none)")
    ap.add_argument("--max-rate", type=float, default=0.0, help="MB/s per connection (0 = any)")
    args = ap.parse_args(argv)
    try:
        pset = parts.load(Path(args.config))
        manifest = build_manifest(pset)
        total = sum(int(f["size"]) for f in manifest["files"].values())

        def started(server: PartitionServer) -> None:
            print(f"serving {total / 1e6:.1f} MB on :{server.port}", flush=True)

        stats = serve_and_wait(
            pset.root,
            manifest,
            read_token(args.token_file),
            port=args.port,
            timeout=args.timeout or None,
            max_rate=args.max_rate * 1e6,
            on_start=started,
        )
    except (TransferError, parts.PartitionError, OSError) as e:
        print(f"partition-server: error: {e}", flush=True)
        return 1
    print(f"served {stats.bytes_sent / 1e6:.1f} MB to {len(stats.peers)} peers", flush=True)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
