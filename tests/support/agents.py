"""What the worker agent's tests share: a real agent process on 127.0.0.1 (``--port 0``), a
TCP proxy to cut it off from a client and bring it back, and a look at a pid's liveness."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.support.paths import REPO
from tests.support.waiting import wait_for
from workeragent.client import AgentAddress, AgentClient

TOKEN = "t0ken-of-the-job"
SERVING = "dgl-agent: serving on "


def python_env(**extra: str) -> dict[str, str]:
    """This environment with the checkout importable (and our extra variables)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class RunningAgent:
    """``python -m workeragent`` (or any argv that starts an agent) on 127.0.0.1, a free
    port; its output lines collected as they come."""

    def __init__(
        self,
        tmp: Path,
        *flags: str,
        command: Sequence[str] = (),
        argv: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.workdir = tmp / "work"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.token_file = tmp / "token"
        self.token_file.write_text(TOKEN + "\n")
        head = list(argv) if argv is not None else [sys.executable, "-m", "workeragent"]
        full = [
            *head,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--token-file",
            str(self.token_file),
            "--workdir",
            str(self.workdir),
            *flags,
        ]
        if command:
            full += ["--", *command]
        self.proc = subprocess.Popen(
            full,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env if env is not None else python_env(),
            cwd=cwd,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._collect, daemon=True).start()
        line = self.wait_line(SERVING, timeout=20)
        self.port = int(line.rsplit(":", 1)[1])
        self.address = AgentAddress("worker-0", "127.0.0.1", self.port)

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()

    def wait_line(self, text: str, timeout: float = 10.0) -> str:
        """The first line of the agent's output containing ``text`` (AssertionError after
        ``timeout`` seconds, quoting what it printed)."""

        def found() -> str | None:
            return next((line for line in self.lines if text in line), None)

        with self._cond:
            if not self._cond.wait_for(found, timeout):
                raise AssertionError(f"the agent printed no {text!r} line: {self.lines}")
            line = found()
            assert line is not None
            return line

    def said(self, text: str) -> bool:
        with self._cond:
            return any(text in line for line in self.lines)

    def client(
        self,
        token: str = TOKEN,
        *,
        timeout: float = 30.0,
        unreachable_after: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> AgentClient:
        return AgentClient(
            self.address, token, timeout=timeout, unreachable_after=unreachable_after, sleep=sleep
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


StartAgent = Callable[..., RunningAgent]  # the start_agent fixture: (*flags, command=...)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_ended(client: AgentClient, proc_id: str, timeout: float = 10.0) -> int:
    """The process's exit code, once the agent says it has ended."""
    status = wait_for(
        lambda: (s := client.status(proc_id)) and not s.running and s,
        what=f"{proc_id} to end",
        timeout=timeout,
    )
    assert status.exit is not None
    return status.exit


class TcpProxy:
    """127.0.0.1:<port> forwarded to an agent; :meth:`stop` closes the port and every
    connection through it (the agent unreachable: refused, reset), :meth:`start` opens the
    same port again."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.start()

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, []
        if listener is not None:
            listener.close()
        for s in conns:  # (shutdown wakes the pump threads blocked on them; close alone does not)
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
        except OSError:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()


GATED = (
    "import os, sys, time\n"
    "for i in range({first}):\n"
    "    print('line %03d' % i, flush=True)\n"
    "while not os.path.exists({gate!r}):\n"
    "    time.sleep(0.02)\n"
    "for i in range({first}, {total}):\n"
    "    print('line %03d' % i, flush=True)\n"
    "sys.exit(5)\n"
)


def gated(gate: Path, first: int = 10, total: int = 30) -> tuple[list[str], bytes]:
    """A program that prints ``first`` lines, waits for ``gate`` to exist, prints the rest
    and exits 5; and all it prints."""
    code = GATED.format(first=first, total=total, gate=str(gate))
    return [sys.executable, "-c", code], b"".join(b"line %03d\n" % i for i in range(total))
