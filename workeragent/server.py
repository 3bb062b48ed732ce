"""The agent's HTTP API: the process table and the pod's files, for dglrun.

Every request but the probe's (``GET /healthz``) carries ``Authorization: Bearer <token>``,
the job's token; any other is answered 401 and logged with the peer's address (never the
token). Errors are JSON, ``{"error": "<message naming the field>"}``: 400 for bad input, 404
for an unknown process or path, 409 for a conflict, 422 for a program that cannot start.

    POST   /v1/procs                   {"id", "argv", "env", "cwd"} -> 201 (200: it existed)
    GET    /v1/procs                   [{"id", "pid", "argv", "running", "exit", "end"}, ...]
    GET    /v1/procs/<id>              one of them
    GET    /v1/procs/<id>/output       ?offset=N&wait=S -> raw bytes; X-Agent-Offset (the
                                       body's first offset), X-Agent-Next, X-Agent-Skipped
                                       (bytes dropped below the buffer), X-Agent-Exit (once
                                       ended and everything read)
    POST   /v1/procs/<id>/signal       {"signal": "SIGTERM"}
    POST   /v1/procs/<id>/stop         {"grace": 5} -> {"exit": n}
    DELETE /v1/procs/<id>              forget an ended process
    PUT    /v1/files?path=P[&mode=0755]  the body (Content-Length) -> {"size", "sha256"}
    GET    /v1/files?path=P            the file
    GET    /v1/stat?path=P             {"exists", "file", "dir", "size"}
    GET    /v1/manifest?dir=D          {"rel/path": [size, sha256], ...}

Relative paths resolve against the agent's workdir. Anybody who reaches the port can open
connections: at most ``max_connections`` are served at once (one thread each); one more is
answered 503 and closed, and a connection silent for ``timeout`` seconds is dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import re
import socket
import tempfile
import threading
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import podcontract as pc
from podcontract import logline
from workeragent.procs import (
    InvalidProcRequest,
    ProcError,
    ProcIdConflict,
    ProcStartFailed,
    ProcTable,
    UnknownProcId,
)

MAX_CONNECTIONS = 64
CONNECTION_TIMEOUT = 120.0  # seconds a connection may send or read nothing
MAX_WAIT = 30.0  # an output request's long poll, at most
MAX_JSON = 1 << 20  # a JSON body's bytes, at most
MAX_GRACE = 3600.0
DEFAULT_GRACE = 10.0
CHUNK = 1 << 20
ERROR_STATUS: dict[type[ProcError], HTTPStatus] = {
    InvalidProcRequest: HTTPStatus.BAD_REQUEST,
    UnknownProcId: HTTPStatus.NOT_FOUND,
    ProcIdConflict: HTTPStatus.CONFLICT,
    ProcStartFailed: HTTPStatus.UNPROCESSABLE_ENTITY,
}

_PROCS = re.compile(r"^/v1/procs(?:/([^/]+)(?:/(output|signal|stop))?)?$")


class AgentRequestError(Exception):
    """A request answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class ClientGone(Exception):
    """The client closed the connection before its request's body was whole."""


class AgentHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server (daemon threads) that serves at most ``slots`` connections at
    once: one more is answered 503 at once and closed, without a thread."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        table: ProcTable,
        token: str,
        *,
        slots: int,
        timeout: float,
        log: Callable[[str], None],
    ) -> None:
        self.table = table
        self.expected = f"Bearer {token}".encode()
        self.connection_timeout = timeout
        self.log = log
        self.slots = slots
        self._slots = threading.BoundedSemaphore(slots)
        super().__init__(address, AgentRequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
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

    def _refuse(self, request: socket.socket) -> None:
        body = json.dumps({"error": f"too many connections (at most {self.slots})"}).encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            request.settimeout(1.0)
            request.sendall(head.encode() + body)
        self.shutdown_request(request)


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _number(value: object, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"{name}: must be a number")
    if not math.isfinite(value) or not low <= value <= high:
        raise AgentRequestError(
            HTTPStatus.BAD_REQUEST, f"{name}: {value!r} is not between {low:g} and {high:g}"
        )
    return float(value)


def _text_list(value: object, name: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"{name}: must be a non-empty list")
    for item in value:
        if not isinstance(item, str) or "\0" in item:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"{name}: {item!r} is not a string without NUL"
            )
    return cast("list[str]", value)


def _environment(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AgentRequestError(HTTPStatus.BAD_REQUEST, "env: must be an object of strings")
    for k, v in value.items():
        if not k or "=" in k or "\0" in k:
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"env: {k!r} is no variable name")
        if not isinstance(v, str) or "\0" in v:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"env: {k}'s value {v!r} is not a string without NUL"
            )
    return cast("dict[str, str]", value)


def file_digest(path: str) -> tuple[int, str]:
    """The file's size and SHA-256 (hex)."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def manifest(root: str) -> dict[str, list[object]]:
    """Every file under ``root`` (symlinks to files followed, not to folders), by its path
    relative to ``root`` with ``/``: ``[size, sha256]``."""
    found: dict[str, list[object]] = {}
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                size, sha = file_digest(path)
                found[rel] = [size, sha]
    return found


class AgentRequestHandler(BaseHTTPRequestHandler):
    """One connection's requests (HTTP/1.1, kept alive)."""

    protocol_version = "HTTP/1.1"
    server: AgentHTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.connection_timeout)  # (a silent peer goes)

    # -- plumbing -------------------------------------------------------------------------

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # (no access log: dglrun polls all the time)

    def log_message(self, format: str, *args: Any) -> None:
        self.server.log(f"dgl-agent: {self.client_address[0]}: {format % args}")

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        ctype: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self._unread_body():
            # what the client is still sending would be read as the next request
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: HTTPStatus, obj: object) -> None:
        self._send(status, (json.dumps(obj) + "\n").encode())

    def _unread_body(self) -> bool:
        if getattr(self, "_body_read", False):
            return False
        return bool(self.headers.get("Transfer-Encoding")) or self.headers.get(
            "Content-Length", "0"
        ).strip() not in ("", "0")

    def _content_length(self, required: bool) -> int | None:
        if self.headers.get("Transfer-Encoding"):
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST,
                "Transfer-Encoding: not supported (send the body with a Content-Length)",
            )
        text = self.headers.get("Content-Length")
        if text is None:
            if required:
                raise AgentRequestError(
                    HTTPStatus.BAD_REQUEST, "Content-Length: required (the body's size)"
                )
            return None
        text = text.strip()
        if not text.isascii() or not text.isdigit():
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"Content-Length: {text!r} is not a size"
            )
        return int(text)

    def _body_json(self) -> dict[str, Any]:
        n = self._content_length(required=False) or 0
        if n > MAX_JSON:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"body: {n} bytes is more than {MAX_JSON}"
            )
        raw = self.rfile.read(n) if n else b""
        if len(raw) < n:
            raise ClientGone()
        self._body_read = True
        if not raw.strip():
            return {}
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"body: not JSON ({e})") from e
        if not isinstance(obj, dict):
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, "body: must be a JSON object")
        return obj

    def _fields(self, body: dict[str, Any], allowed: tuple[str, ...]) -> None:
        unknown = sorted(set(body) - set(allowed))
        if unknown:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST,
                f"{unknown[0]}: unknown field (expected {', '.join(allowed)})",
            )

    def _authorized(self) -> bool:
        given = (self.headers.get("Authorization") or "").encode("latin-1", "replace")
        if hmac.compare_digest(given, self.server.expected):
            return True
        why = "no token" if not given else "wrong token"
        path = urllib.parse.urlsplit(self.path).path
        self.server.log(
            f"dgl-agent: refused {self.command} {path[:200]!r} from {self.client_address[0]}: {why}"
        )
        self._json(HTTPStatus.UNAUTHORIZED, {"error": f"unauthorized: {why} (Authorization)"})
        return False

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        self._body_read = False
        self._replied = False
        try:
            url = urllib.parse.urlsplit(self.path)
            if url.path == pc.AGENT_HEALTH_PATH and self.command == "GET":
                self._send(HTTPStatus.OK, b"ok\n", "text/plain")
                return
            if not self._authorized():
                return
            self.server.table.touch()
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
            try:
                self._route(url.path, query)
            finally:
                self.server.table.touch()  # (a long request, a stop or a manifest, counts)
        except AgentRequestError as e:
            self._error(e.status, str(e))
        except ProcError as e:
            self._error(ERROR_STATUS[type(e)], str(e))
        except (ClientGone, ConnectionError, socket.timeout):  # noqa: UP041 (3.9: no alias)
            self.close_connection = True

    def _error(self, status: HTTPStatus, message: str) -> None:
        if self._replied:  # (a streamed body was cut short: the client sees it short)
            self.close_connection = True
            return
        self._json(status, {"error": message})

    def _route(self, path: str, query: dict[str, list[str]]) -> None:
        method = self.command
        m = _PROCS.match(path)
        routes: dict[str, Callable[[], None]]
        if m:
            proc_id, action = m.group(1), m.group(2)
            if proc_id is None:
                routes = {"GET": self._list, "POST": self._start}
            elif action is None:
                routes = {
                    "GET": lambda: self._status(proc_id),
                    "DELETE": lambda: self._forget(proc_id),
                }
            elif action == "output":
                routes = {"GET": lambda: self._output(proc_id, query)}
            elif action == "signal":
                routes = {"POST": lambda: self._signal(proc_id)}
            else:
                routes = {"POST": lambda: self._stop(proc_id)}
        elif path == "/v1/files":
            routes = {"GET": lambda: self._get_file(query), "PUT": lambda: self._put_file(query)}
        elif path == "/v1/stat":
            routes = {"GET": lambda: self._stat(query)}
        elif path == "/v1/manifest":
            routes = {"GET": lambda: self._manifest(query)}
        else:
            raise AgentRequestError(HTTPStatus.NOT_FOUND, f"path: no such endpoint {path!r}")
        route = routes.get(method)
        if route is None:
            raise AgentRequestError(
                HTTPStatus.METHOD_NOT_ALLOWED,
                f"method: {method} is not allowed on {path} (only {', '.join(routes)})",
            )
        route()

    # -- processes ------------------------------------------------------------------------

    def _start(self) -> None:
        body = self._body_json()
        self._fields(body, ("id", "argv", "env", "cwd"))
        proc_id = body.get("id")
        if not isinstance(proc_id, str):
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, "id: must be a string")
        argv = _text_list(body.get("argv"), "argv")
        env = _environment(body.get("env"))
        cwd = body.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, "cwd: must be a path or null")
        proc, created = self.server.table.start(proc_id, argv, env, cwd)
        status = HTTPStatus.CREATED if created else HTTPStatus.OK
        self._json(status, {"id": proc.id, "pid": proc.pid})

    def _list(self) -> None:
        self._json(HTTPStatus.OK, [p.describe() for p in self.server.table.list()])

    def _status(self, proc_id: str) -> None:
        self._json(HTTPStatus.OK, self.server.table.get(proc_id).describe())

    def _forget(self, proc_id: str) -> None:
        self.server.table.forget(proc_id)
        self._json(HTTPStatus.OK, {"id": proc_id})

    def _output(self, proc_id: str, query: dict[str, list[str]]) -> None:
        text = _one(query, "offset") or "0"
        if not text.isascii() or not text.isdigit():
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"offset: {text!r} is not an offset")
        try:
            wait = float(_one(query, "wait") or "0")
        except ValueError:
            wait = -1.0
        if not math.isfinite(wait) or wait < 0:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"wait: {_one(query, 'wait')!r} is not a number of seconds"
            )
        out = self.server.table.read(proc_id, int(text), min(wait, MAX_WAIT))
        headers = {
            "X-Agent-Offset": str(out.start),
            "X-Agent-Next": str(out.next),
            "X-Agent-Skipped": str(out.skipped),
        }
        if out.exit is not None:
            headers["X-Agent-Exit"] = str(out.exit)
        self._send(HTTPStatus.OK, out.data, "application/octet-stream", headers)

    def _signal(self, proc_id: str) -> None:
        body = self._body_json()
        self._fields(body, ("signal",))
        name = body.get("signal")
        if not isinstance(name, str):
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, "signal: must be a signal's name")
        self.server.table.signal(proc_id, name)
        self._json(HTTPStatus.OK, {"id": proc_id, "signal": name})

    def _stop(self, proc_id: str) -> None:
        body = self._body_json()
        self._fields(body, ("grace",))
        grace = _number(body.get("grace", DEFAULT_GRACE), "grace", 0.0, MAX_GRACE)
        code = self.server.table.stop(proc_id, grace)
        self._json(HTTPStatus.OK, {"id": proc_id, "exit": code})

    # -- files ----------------------------------------------------------------------------

    def _path(self, query: dict[str, list[str]], name: str) -> str:
        text = _one(query, name)
        if not text or "\0" in text:
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"{name}: required (a path)")
        return os.path.join(self.server.table.workdir, text)

    def _put_file(self, query: dict[str, list[str]]) -> None:
        path = self._path(query, "path")
        mode_text = _one(query, "mode")
        mode = 0o644
        if mode_text is not None:
            try:
                mode = int(mode_text, 8)
            except ValueError:
                mode = -1
            if not 0 <= mode <= 0o7777:
                raise AgentRequestError(
                    HTTPStatus.BAD_REQUEST, f"mode: {mode_text!r} is not an octal mode (0755)"
                )
        length = self._content_length(required=True)
        assert length is not None
        if os.path.isdir(path):
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"path: {path} is a directory")
        parent = os.path.dirname(path) or "."
        try:
            os.makedirs(parent, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(path)}.")
        except OSError as e:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"path: cannot write {path}: {e.strerror or e}"
            ) from e
        h = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as f:
                left = length
                while left:
                    block = self.rfile.read(min(CHUNK, left))
                    if not block:
                        raise ClientGone()
                    h.update(block)
                    f.write(block)
                    left -= len(block)
                self._body_read = True
                os.fchmod(f.fileno(), mode)
            os.replace(tmp, path)
        except OSError as e:
            os.unlink(tmp)
            if isinstance(e, (ConnectionError, socket.timeout)):
                raise
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"path: cannot write {path}: {e.strerror or e}"
            ) from e
        except BaseException:
            os.unlink(tmp)
            raise
        self._json(HTTPStatus.OK, {"size": length, "sha256": h.hexdigest()})

    def _get_file(self, query: dict[str, list[str]]) -> None:
        path = self._path(query, "path")
        try:
            f = open(path, "rb")  # noqa: SIM115 (sent with sendfile below)
        except FileNotFoundError as e:
            raise AgentRequestError(HTTPStatus.NOT_FOUND, f"path: no such file {path}") from e
        except IsADirectoryError as e:
            raise AgentRequestError(HTTPStatus.BAD_REQUEST, f"path: {path} is a directory") from e
        except OSError as e:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"path: cannot read {path}: {e.strerror or e}"
            ) from e
        with f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self._replied = True
            if size:
                self.connection.sendfile(f, 0, size)

    def _stat(self, query: dict[str, list[str]]) -> None:
        path = self._path(query, "path")
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._json(HTTPStatus.OK, {"exists": False, "file": False, "dir": False, "size": 0})
            return
        except OSError as e:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"path: cannot stat {path}: {e.strerror or e}"
            ) from e
        is_file = os.path.isfile(path)
        self._json(
            HTTPStatus.OK,
            {
                "exists": True,
                "file": is_file,
                "dir": os.path.isdir(path),
                "size": st.st_size if is_file else 0,
            },
        )

    def _manifest(self, query: dict[str, list[str]]) -> None:
        root = self._path(query, "dir")
        if not os.path.isdir(root):
            raise AgentRequestError(HTTPStatus.NOT_FOUND, f"dir: {root} is not a directory")
        try:
            found = manifest(root)
        except OSError as e:
            raise AgentRequestError(
                HTTPStatus.BAD_REQUEST, f"dir: cannot read {root}: {e.strerror or e}"
            ) from e
        self._json(HTTPStatus.OK, found)


class AgentServer:
    """The HTTP server over a process table, on its own thread or the caller's."""

    def __init__(
        self,
        table: ProcTable,
        token: str,
        *,
        host: str = "0.0.0.0",
        port: int = pc.AGENT_PORT,
        max_connections: int = MAX_CONNECTIONS,
        timeout: float = CONNECTION_TIMEOUT,
        log: Callable[[str], None] = logline.say,
    ) -> None:
        self.table = table
        self._httpd = AgentHTTPServer(
            (host, port), table, token, slots=max_connections, timeout=timeout, log=log
        )
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> AgentServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.1,), name="agent-http", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
        self._httpd.server_close()
