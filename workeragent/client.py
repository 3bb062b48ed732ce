"""dglrun's side of the worker agent: :class:`AgentClient`, one per worker.

A new connection per request (``http.client``; nothing is kept open between requests, so a
restarted agent or a dropped connection costs nothing but the request in flight). A transient
failure (connection refused or reset, a timeout, a 5xx answer) is retried with backoff, the
same request again: starting a process is idempotent by its id, reading output is by offset,
so a retried request neither starts a process twice nor loses or repeats a byte. Only after
``unreachable_after`` seconds of failures in a row does a call give up with
:class:`AgentUnreachable`. A 401 (:class:`AgentRefused`: the token is wrong) is never retried;
other 4xx answers are :class:`AgentError` quoting the agent.

:meth:`AgentClient.follow` reads a process's output to its end, from any offset: dglrun keeps
the offset it has written, and follows again from there after a failure of its own.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import http.client
import json
import os
import secrets
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import podcontract as pc

KILL_WAIT = 10.0  # the agent waits this long after SIGKILL in a stop (procs.KILL_WAIT)
MAX_BACKOFF = 5.0
FIRST_BACKOFF = 0.2
BLOCK = 1 << 20


class AgentError(Exception):
    """A request to a worker's agent failed; the message names the worker and the operation
    and quotes the agent's answer."""


class AgentRefused(AgentError):
    """The agent answered 401: the token is wrong (never retried)."""


class AgentUnreachable(AgentError):
    """The agent could not be reached (or answered 5xx) for ``unreachable_after`` seconds."""


class _Transient(Exception):
    """One attempt failed in a way worth retrying (the message says how)."""


@dataclass(frozen=True)
class AgentAddress:
    """Where a worker's agent listens: its pod's name (for messages) and IP."""

    name: str
    ip: str
    port: int = pc.AGENT_PORT

    def __str__(self) -> str:
        return f"{self.name} ({self.ip}:{self.port})"


@dataclass(frozen=True)
class Chunk:
    """Output from absolute offset ``start`` to ``next``; ``skipped`` bytes before ``start``
    were dropped by the agent's buffer; ``exit`` once the process ended and all was read."""

    start: int
    next: int
    data: bytes
    exit: int | None
    skipped: int


@dataclass(frozen=True)
class AgentProcStatus:
    """A process the agent runs or ran: ``end`` is its output's length so far."""

    id: str
    pid: int
    argv: tuple[str, ...]
    running: bool
    exit: int | None
    end: int


@dataclass(frozen=True)
class RemoteStat:
    exists: bool
    file: bool
    dir: bool
    size: int


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


def _quote(body: bytes) -> str:
    """The agent's error message in a reply body (JSON ``{"error": ...}``, else the text)."""
    try:
        obj = json.loads(body)
        if isinstance(obj, dict) and isinstance(obj.get("error"), str):
            return json.dumps(obj["error"])
    except ValueError:
        pass
    text = body.decode("utf-8", "replace").strip()
    return json.dumps(text[:300] + ("..." if len(text) > 300 else ""))


def _local_digest(path: str) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK)
            if not block:
                return size, h.hexdigest()
            h.update(block)
            size += len(block)


class AgentClient:
    """Requests to one worker's agent (safe to share between threads)."""

    def __init__(
        self,
        address: AgentAddress,
        token: str,
        *,
        timeout: float = 30.0,
        unreachable_after: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.address = address
        self._auth = f"Bearer {token}"
        self.timeout = timeout
        self.unreachable_after = unreachable_after
        self._sleep = sleep
        self._clock = clock

    # -- requests -------------------------------------------------------------------------

    def _error(self, op: str, detail: str, kind: type[AgentError] = AgentError) -> AgentError:
        return kind(f"worker {self.address}: {op}: {detail}")

    def _attempt(
        self,
        op: str,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        upload: str | None = None,
        download: Callable[[http.client.HTTPResponse], bytes] | None = None,
        timeout: float | None = None,
    ) -> _Answer:
        """One request on a new connection. ``upload``: a local file sent as the body;
        ``download``: reads a 200 answer's body (else it is read whole)."""
        conn = http.client.HTTPConnection(
            self.address.ip,
            self.address.port,
            timeout=self.timeout if timeout is None else timeout,
            blocksize=1 << 16,
        )
        headers = {"Authorization": self._auth}
        source = None
        if upload is not None:
            try:
                source = open(upload, "rb")  # noqa: SIM115 (closed below)
                headers["Content-Length"] = str(os.fstat(source.fileno()).st_size)
            except OSError as e:
                raise self._error(op, f"{upload}: {e.strerror or e}") from e
        elif body is not None:
            headers["Content-Type"] = "application/json"
        try:
            try:
                conn.request(method, path, body=source or body, headers=headers)
            except (OSError, http.client.HTTPException) as e:
                # The agent may have answered (and closed) before taking the whole body (a
                # 401 for an upload): its answer says more than the broken pipe.
                if conn.sock is None:  # (not even connected)
                    raise _Transient(f"{type(e).__name__}: {e}") from e
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    raise _Transient(f"{type(e).__name__}: {e}") from e
            else:
                resp = conn.getresponse()
            reader = download if resp.status == 200 and download is not None else None
            data = reader(resp) if reader else resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise _Transient(f"{type(e).__name__}: {e}") from e
        finally:
            conn.close()
            if source is not None:
                source.close()
        if resp.status == 401:
            raise self._error(
                op, f"the agent refused the token (401): {_quote(data)}", AgentRefused
            )
        if resp.status >= 500:
            raise _Transient(f"the agent answered {resp.status}: {_quote(data)}")
        return _Answer(resp.status, resp.headers, data)

    def _call(
        self,
        op: str,
        method: str,
        path: str,
        *,
        ok: tuple[int, ...] = (200,),
        retried_ok: tuple[int, ...] = (),
        **kwargs: Any,
    ) -> _Answer:
        """The request, retried over transient failures for up to ``unreachable_after``
        seconds; an answer outside ``ok`` is an AgentError quoting the agent (one in
        ``retried_ok`` is fine too once a previous attempt may have done the work)."""
        failing_since: float | None = None
        pause = FIRST_BACKOFF
        while True:
            began = self._clock()
            try:
                answer = self._attempt(op, method, path, **kwargs)
            except _Transient as e:
                now = self._clock()
                if failing_since is None:
                    failing_since = began
                if now - failing_since >= self.unreachable_after:
                    raise self._error(
                        op, f"unreachable for {now - failing_since:.0f}s: {e}", AgentUnreachable
                    ) from e
                self._sleep(min(pause, max(0.0, failing_since + self.unreachable_after - now)))
                pause = min(pause * 2, MAX_BACKOFF)
                continue
            if answer.status in ok or (failing_since is not None and answer.status in retried_ok):
                return answer
            raise self._error(op, f"the agent answered {answer.status}: {_quote(answer.body)}")

    def _json(self, answer: _Answer, op: str) -> Any:
        try:
            return json.loads(answer.body)
        except ValueError as e:
            raise self._error(op, f"the agent's answer is not JSON: {_quote(answer.body)}") from e

    @staticmethod
    def _proc_path(proc_id: str, tail: str = "") -> str:
        return f"/v1/procs/{urllib.parse.quote(proc_id, safe='')}{tail}"

    @staticmethod
    def _query(endpoint: str, params: Mapping[str, str]) -> str:
        return f"{endpoint}?{urllib.parse.urlencode(params)}"

    # -- processes ------------------------------------------------------------------------

    def health(self) -> bool:
        """Whether the agent answers its probe (one attempt, no token)."""
        conn = http.client.HTTPConnection(self.address.ip, self.address.port, timeout=self.timeout)
        try:
            conn.request("GET", pc.AGENT_HEALTH_PATH)
            resp = conn.getresponse()
            return resp.status == 200 and resp.read().strip() == b"ok"
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def start(
        self,
        proc_id: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> int:
        """Start ``argv`` as ``proc_id`` (idempotent: the same id and argv again is the same
        process); its pid."""
        body = json.dumps({"id": proc_id, "argv": list(argv), "env": dict(env or {}), "cwd": cwd})
        op = f"start {proc_id}"
        answer = self._call(op, "POST", "/v1/procs", ok=(200, 201), body=body.encode())
        return int(self._json(answer, op)["pid"])

    def output(self, proc_id: str, offset: int, wait: float = 20.0) -> Chunk:
        """The output after ``offset``, waiting up to ``wait`` seconds for some."""
        op = f"output of {proc_id}"
        path = self._query(
            self._proc_path(proc_id, "/output"), {"offset": str(offset), "wait": f"{wait:g}"}
        )
        answer = self._call(op, "GET", path, timeout=self.timeout + wait)
        h = answer.headers
        try:
            start, nxt = int(h["X-Agent-Offset"]), int(h["X-Agent-Next"])
            skipped = int(h["X-Agent-Skipped"])
            code = int(h["X-Agent-Exit"]) if h.get("X-Agent-Exit") is not None else None
        except (KeyError, TypeError, ValueError) as e:
            raise self._error(op, f"the agent's answer lacks its offsets ({e})") from e
        if nxt - start != len(answer.body):
            raise self._error(op, f"{len(answer.body)} bytes for offsets {start} to {nxt}")
        return Chunk(start, nxt, answer.body, code, skipped)

    def follow(
        self,
        proc_id: str,
        offset: int,
        on_bytes: Callable[[bytes], None],
        *,
        wait: float = 20.0,
        on_skip: Callable[[int], None] | None = None,
    ) -> int:
        """Hand the process's output from ``offset`` on to ``on_bytes`` as it comes, until the
        process ends; its exit code. Bytes the agent's buffer dropped before they were read
        are counted to ``on_skip`` (by default a line saying so goes to ``on_bytes``)."""
        while True:
            chunk = self.output(proc_id, offset, wait)
            if chunk.skipped:
                if on_skip is not None:
                    on_skip(chunk.skipped)
                else:
                    on_bytes(f"\n[dgl-agent: {chunk.skipped} bytes of output dropped]\n".encode())
            if chunk.data:
                on_bytes(chunk.data)
            offset = chunk.next
            if chunk.exit is not None:
                return chunk.exit

    def signal(self, proc_id: str, sig: str) -> None:
        """Send ``sig`` (SIGTERM, SIGINT, SIGKILL, SIGHUP, SIGUSR1, SIGUSR2) to the process's
        whole group."""
        body = json.dumps({"signal": sig}).encode()
        self._call(f"{sig} to {proc_id}", "POST", self._proc_path(proc_id, "/signal"), body=body)

    def stop(self, proc_id: str, grace: float = 10.0) -> int | None:
        """SIGTERM, ``grace`` seconds, SIGKILL: its exit code (None: it has not ended)."""
        op = f"stop {proc_id}"
        answer = self._call(
            op,
            "POST",
            self._proc_path(proc_id, "/stop"),
            body=json.dumps({"grace": grace}).encode(),
            timeout=self.timeout + grace + KILL_WAIT,
        )
        code = self._json(answer, op).get("exit")
        return None if code is None else int(code)

    @staticmethod
    def _status(obj: dict[str, Any]) -> AgentProcStatus:
        return AgentProcStatus(
            id=str(obj["id"]),
            pid=int(obj["pid"]),
            argv=tuple(obj["argv"]),
            running=bool(obj["running"]),
            exit=None if obj["exit"] is None else int(obj["exit"]),
            end=int(obj["end"]),
        )

    def status(self, proc_id: str) -> AgentProcStatus:
        op = f"status of {proc_id}"
        return self._status(self._json(self._call(op, "GET", self._proc_path(proc_id)), op))

    def list(self) -> builtins.list[AgentProcStatus]:
        op = "list processes"
        return [self._status(p) for p in self._json(self._call(op, "GET", "/v1/procs"), op)]

    def forget(self, proc_id: str) -> None:
        """Drop an ended process's record and output."""
        self._call(f"forget {proc_id}", "DELETE", self._proc_path(proc_id), retried_ok=(404,))

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        *,
        cwd: str | None = None,
    ) -> tuple[int, str]:
        """Run ``argv`` to its end (a random id, forgotten after): its exit code and output.
        Still running after ``timeout`` seconds: stopped, and an AgentError."""
        proc_id = f"run-{secrets.token_hex(8)}"
        self.start(proc_id, argv, env, cwd)
        deadline = self._clock() + timeout
        out = bytearray()
        offset = 0
        try:
            while True:
                left = deadline - self._clock()
                if left <= 0:
                    code = self.stop(proc_id, grace=2.0)
                    raise self._error(
                        f"run {argv[0]}",
                        f"still running after {timeout:g}s: stopped (exit {code}); its output: "
                        f"{_quote(bytes(out[-300:]))}",
                    )
                chunk = self.output(proc_id, offset, wait=min(20.0, left))
                out += chunk.data
                offset = chunk.next
                if chunk.exit is not None:
                    return chunk.exit, out.decode("utf-8", "replace")
        finally:
            with contextlib.suppress(AgentError):
                self.forget(proc_id)

    # -- files ----------------------------------------------------------------------------

    def put_file(self, remote: str, local_path: str, *, mode: int | None = None) -> tuple[int, str]:
        """Copy the local file to ``remote`` on the worker (parent folders made; replaced
        whole); its size and SHA-256, checked against the local file's."""
        op = f"put {remote}"
        params = {"path": remote}
        if mode is not None:
            params["mode"] = f"{mode:04o}"
        try:
            size, sha = _local_digest(local_path)
        except OSError as e:
            raise self._error(op, f"{local_path}: {e.strerror or e}") from e
        answer = self._call(op, "PUT", self._query("/v1/files", params), upload=local_path)
        got = self._json(answer, op)
        if (got.get("size"), got.get("sha256")) != (size, sha):
            raise self._error(
                op,
                f"the agent wrote {got.get('size')} bytes, sha256 {got.get('sha256')}; "
                f"{local_path} has {size}, {sha}",
            )
        return size, sha

    def get_file(self, remote: str, local_path: str) -> bool:
        """Copy ``remote`` from the worker to ``local_path`` (written whole or not at all);
        False if there is no such file."""
        op = f"get {remote}"
        part = f"{local_path}.part-{secrets.token_hex(4)}"

        def download(resp: http.client.HTTPResponse) -> bytes:
            try:
                f = open(part, "wb")  # noqa: SIM115 (closed below)
            except OSError as e:
                raise self._error(op, f"{local_path}: {e.strerror or e}") from e
            with f:
                while True:
                    block = resp.read(BLOCK)
                    if not block:
                        break
                    try:
                        f.write(block)
                    except OSError as e:
                        raise self._error(op, f"{local_path}: {e.strerror or e}") from e
            if resp.length:  # (http.client counts down what the agent announced)
                raise http.client.IncompleteRead(b"", resp.length)
            return b""

        try:
            answer = self._call(
                op,
                "GET",
                self._query("/v1/files", {"path": remote}),
                ok=(200, 404),
                download=download,
            )
            if answer.status == 404:
                return False
            os.replace(part, local_path)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)

    def stat(self, remote: str) -> RemoteStat:
        op = f"stat {remote}"
        obj = self._json(self._call(op, "GET", self._query("/v1/stat", {"path": remote})), op)
        return RemoteStat(
            bool(obj["exists"]), bool(obj["file"]), bool(obj["dir"]), int(obj["size"])
        )

    def manifest(self, remote_dir: str, *, timeout: float = 600.0) -> dict[str, tuple[int, str]]:
        """Every file under ``remote_dir``: its path relative to it, size and SHA-256 (the
        agent hashes them all before answering: ``timeout`` seconds for that)."""
        op = f"manifest of {remote_dir}"
        answer = self._call(
            op, "GET", self._query("/v1/manifest", {"dir": remote_dir}), timeout=timeout
        )
        obj = self._json(answer, op)
        return {str(rel): (int(size), str(sha)) for rel, (size, sha) in obj.items()}
