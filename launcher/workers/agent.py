"""Workers reached through their agents (``workeragent/``, each worker pod's main process),
over the pod network with the job's token: nothing of dglrun's data path crosses the API
server, so training outlives an API server restart.

Each remote process runs under ``launcher.workers.remote run --keep-session`` (its peak memory,
an OOM kill, an MPI rank's end are said as over ``kubectl exec``), in a session the agent
started, so the agent stops it and everything it spawned at once. The agent keeps each
process's output (one ordered stream, stdout and stderr together) by byte offset: when the
connection drops, :class:`AgentProc` asks again from the offset it had, and the process goes on
meanwhile. mpirun reaches the workers through the same agents (:meth:`AgentTransport.rsh_agent`:
``workeragent.rsh``).
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import podcontract as pc
from launcher import checksums, programs
from launcher.workers.hostfile import Host
from launcher.workers.transport import (
    LastWords,
    LineSink,
    PopenProc,
    Proc,
    WorkerTransportError,
    default_sink,
    stop_all,
)
from workeragent import rsh as agent_rsh
from workeragent import settings as agent_settings
from workeragent.client import (
    AgentAddress,
    AgentClient,
    AgentError,
    AgentRefused,
    AgentUnreachable,
)

T = TypeVar("T")

PIDFILE_DIR = "/tmp/dglrun"
RSH_PROGRAM = "workeragent.rsh"
# a remote process's id at its agent: [A-Za-z0-9._-], at most 128
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
STOP_GRACE = 3.0  # seconds between SIGTERM and SIGKILL when dglrun stops a process
POLL_WAIT = 20.0  # seconds an agent holds a request for output that has none yet
REQUEST_TIMEOUT = 30.0  # seconds of silence on a connection before it counts as lost
UNREACHABLE_AFTER = 60.0  # seconds of failed requests in a row before an agent counts as lost
LOST_EXIT = 255  # a process whose agent could no longer be reached (its own code is unknown)


def read_token(path: str) -> str:
    """The job's token (the operator mounts its Secret), read as the agents and mpirun's
    remote shell read it; a clear error naming the file."""
    try:
        return agent_settings.read_token(path)
    except agent_settings.TokenFileError as e:
        raise WorkerTransportError(
            f"cannot read the job's token ({e}; the workers' agents ask it)"
        ) from e


class _Lines:
    """Bytes as they arrive, cut into lines for the sink."""

    def __init__(self, label: str, sink: LineSink, said: LastWords) -> None:
        self.label, self.sink, self.said = label, sink, said
        self._partial = b""

    def feed(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            self.line(raw.decode("utf-8", "replace"))

    def line(self, text: str) -> None:
        self.said.hear(text)
        self.sink(self.label, text)

    def flush(self) -> None:
        if self._partial:
            self.line(self._partial.decode("utf-8", "replace"))
            self._partial = b""


class AgentProc:
    """A process an agent runs, followed from a thread of its own: its output to the sink,
    its exit code once it ended (:data:`LOST_EXIT` when its agent stayed unreachable)."""

    def __init__(
        self,
        label: str,
        client: AgentClient,
        proc_id: str,
        sink: LineSink,
        poll_wait: float = POLL_WAIT,
    ) -> None:
        self.label = label
        self._poll_wait = poll_wait
        self.id = proc_id
        self._client = client
        self._said = LastWords()
        self._lines = _Lines(label, sink, self._said)
        self._exit: int | None = None
        self._done = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._follow, name=f"agent-{label}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            code = self._client.follow(self.id, 0, self._lines.feed, wait=self._poll_wait)
        except AgentError as e:
            self._lines.flush()
            self._lines.line(f"dglrun: lost the process: {e}")
            code = LOST_EXIT
        self._lines.flush()
        self._exit = code
        self._done.set()

    def poll(self) -> int | None:
        return self._exit if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.label, timeout or 0.0)
        assert self._exit is not None
        return self._exit

    def last_line(self) -> str:
        return self._said.line

    def last_error_line(self) -> str:
        return self._said.error_line

    def detach(self) -> None:
        """Leave the process running: :meth:`stop` no longer stops it (a launcher that
        replaces this one follows it)."""
        self._stopped = True

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if not self._done.is_set():
            try:
                self._client.stop(self.id, STOP_GRACE)
            except AgentError as e:
                self._lines.line(f"dglrun: warning: could not stop the process: {e}")
        self._done.wait(STOP_GRACE + 10)


class AgentTransport:
    """The :class:`~launcher.workers.transport.Transport` of dglrun in a launcher pod."""

    def __init__(
        self,
        hosts: list[Host],
        *,
        token_file: str,
        hostfile: str,
        workspace: str,
        python: str = "python3",
        sink: LineSink = default_sink,
        timeout: float = 600.0,
        unreachable_after: float = UNREACHABLE_AFTER,
        scratch: Path | None = None,
        agent_port: int = pc.AGENT_PORT,
        poll_wait: float = POLL_WAIT,
        request_timeout: float = REQUEST_TIMEOUT,
        rsh_path: str = pc.AGENT_RSH_PATH,
        attempt_tag: str = "",
    ) -> None:
        self._hosts = hosts
        self._token_file = token_file
        self._token = read_token(token_file)
        self._hostfile = hostfile
        self._workspace = workspace
        self.python = python
        self.sink = sink
        self.timeout = timeout
        self.unreachable_after = unreachable_after
        self.agent_port = agent_port
        self.poll_wait = poll_wait
        self.request_timeout = request_timeout  # (more than poll_wait)
        self._rsh_path = rsh_path
        # (its own is removed at close: it holds mpirun's remote shell script)
        self._own_scratch = scratch is None
        self._scratch = scratch or Path(tempfile.mkdtemp(prefix="dglrun-agent-"))
        self._procs: list[AgentProc] = []
        self._coordinators: list[Proc] = []
        self._starts: dict[str, int] = {}  # label -> how many times this run started it
        # Ids and pidfiles: with an ``attempt_tag`` (a launcher pod's: its job's uid and
        # attempt) the same for every launcher of the attempt, so that one replacing a lost
        # launcher finds the processes again (the agent answers a start of an id it runs, with
        # the same argv, with that process: start() then follows it, from its first byte);
        # without one, this run's only
        self._run_id = attempt_tag or secrets.token_hex(4)
        self.reattaches = bool(attempt_tag)
        self._deadline: float | None = None
        self._lock = threading.Lock()

    # -- plumbing -------------------------------------------------------------------------

    def until(self, deadline: float | None) -> None:
        self._deadline = deadline

    def _left(self, what: str, timeout: float | None = None) -> float:
        """The time a call may take: its own limit, within the phase's deadline."""
        left = timeout or self.timeout
        if self._deadline is not None:
            left = min(left, self._deadline - time.monotonic())
            if left <= 0:
                raise WorkerTransportError(f"{what}: no time left in the phase")
        return left

    def client(
        self, worker: Host, timeout: float | None = None, unreachable_after: float | None = None
    ) -> AgentClient:
        """A client of the worker's agent; ``timeout``: a call's own limit (a run's), within
        ``request_timeout``; ``unreachable_after``: by default the transport's."""
        return AgentClient(
            AgentAddress(worker.name, worker.ip, self.agent_port),
            self._token,
            timeout=min(timeout or self.request_timeout, self.request_timeout),
            unreachable_after=(
                self.unreachable_after if unreachable_after is None else unreachable_after
            ),
        )

    def _bounded(
        self,
        worker: Host,
        what: str,
        call: Callable[[AgentClient], T],
        timeout: float | None = None,
    ) -> T:
        """``call`` with a client whose requests and retries end within ``timeout`` and the
        phase's deadline: an agent that hangs or is away fails the phase when its time is up,
        not after ``unreachable_after``. An AgentError is a WorkerTransportError naming
        ``what``, which says when the phase's time ran out."""
        left = self._left(what, timeout)
        client = self.client(worker, left, min(left, self.unreachable_after))
        try:
            return call(client)
        except AgentError as e:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                raise WorkerTransportError(
                    f"{what}: timed out, the phase's time ran out: {e}"
                ) from e
            raise WorkerTransportError(f"{what}: {e}") from e

    def _next_id(self, label: str) -> str:
        """``<run id>-<label>-<n>``: the n-th start of ``label`` in this run (a launcher
        replaying the attempt starts the same labels in the same order)."""
        with self._lock:
            n = self._starts[label] = self._starts.get(label, 0) + 1
        return _UNSAFE.sub("-", f"{self._run_id}-{label}-{n}")[-128:]

    # -- Transport ------------------------------------------------------------------------

    def workers(self) -> list[Host]:
        return list(self._hosts)

    def workspace(self, worker: Host) -> str:
        return self._workspace

    def copy_to(self, worker: Host, local: Path, remote: str) -> None:
        files = sorted(p for p in local.rglob("*") if p.is_file()) if local.is_dir() else [local]
        for path in files:  # (each file within the phase's time left)
            target = remote if path == local else f"{remote}/{path.relative_to(local)}"
            put = functools.partial(AgentClient.put_file, remote=target, local_path=str(path))
            self._bounded(worker, f"copy {local} to {worker.name}:{remote}", put)

    def write_file(self, worker: Host, remote: str, content: str) -> None:
        local = self._scratch / f"write-{self._next_id('file')}"
        local.write_text(content)
        try:
            self._bounded(
                worker, f"write {worker.name}:{remote}", lambda c: c.put_file(remote, str(local))
            )
        finally:
            local.unlink(missing_ok=True)

    def manifest(self, worker: Host, remote_dir: str) -> dict[str, tuple[int, str]]:
        what = f"manifest of {worker.name}:{remote_dir}"
        left = self._left(what)  # (the agent hashes every file before it answers)
        return self._bounded(worker, what, lambda c: c.manifest(remote_dir, timeout=left))

    def fetch(self, worker: Host, remote: str, local: Path) -> bool:
        """A file, or a folder (every file in it, each checked against the SHA-256 the agent
        lists: a name that would land outside ``local`` is refused)."""
        what = f"fetch {worker.name}:{remote}"
        found = self._bounded(worker, what, lambda c: c.stat(remote))
        if not found.exists:
            return False
        local.parent.mkdir(parents=True, exist_ok=True)
        if not found.dir:
            return self._bounded(worker, what, lambda c: c.get_file(remote, str(local)))
        left = self._left(what)
        files = self._bounded(worker, what, lambda c: c.manifest(remote, timeout=left))
        local.mkdir(exist_ok=True)
        for rel, (size, sha) in sorted(files.items()):
            why = checksums.outside(rel)
            if why is not None:
                raise WorkerTransportError(f"{what}: the agent listed {rel!r}, {why}")
            target = local / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            get = functools.partial(
                AgentClient.get_file, remote=f"{remote}/{rel}", local_path=str(target)
            )
            got = self._bounded(worker, what, get)
            if not got or (target.stat().st_size, checksums.file_sha256(target)) != (size, sha):
                raise WorkerTransportError(f"{what}: {rel} did not arrive intact (changed?)")
        return True

    def exists(self, worker: Host, path: str) -> bool:
        """Whether ``path`` is a file on the worker; an agent that cannot be reached (or
        refuses the token) is an error, never a missing file."""

        def stat(client: AgentClient) -> bool:
            try:
                return client.stat(path).file
            except (AgentUnreachable, AgentRefused):
                raise
            except AgentError:  # (the agent's answer about the path: cannot stat it)
                return False

        return self._bounded(worker, f"look for {path} on {worker.name}", stat, 60)

    def start(self, worker: Host, argv: list[str], env: dict[str, str], label: str) -> Proc:
        proc_id = self._next_id(label)
        pidfile = f"{PIDFILE_DIR}/{proc_id}.pid"
        wrap = programs.argv(self.python, programs.REMOTE, "run", "--keep-session", "--pidfile")
        client = self.client(worker)
        try:
            client.start(proc_id, [*wrap, pidfile, "--", *argv], env)
        except AgentError as e:
            raise WorkerTransportError(f"{label}: cannot start {argv[0]}: {e}") from e
        proc = AgentProc(label, client, proc_id, self.sink, self.poll_wait)
        self._procs.append(proc)
        return proc

    def run(self, worker: Host, argv: list[str], timeout: float) -> tuple[int, str]:
        what = f"{worker.name}: {argv[0]}"
        left = self._left(what, timeout)
        return self._bounded(worker, what, lambda c: c.run(argv, timeout=left), timeout)

    def kill(self, worker: Host, pidfiles: list[str]) -> None:
        argv = programs.argv(self.python, programs.REMOTE, "kill", "--pidfile", *pidfiles)
        try:
            self.client(worker, 30).run(argv, timeout=30)
        except AgentError as e:
            self.sink("dglrun", f"warning: could not stop processes on {worker.name}: {e}")

    def rsh_agent(self) -> str:
        """The program mpirun runs as ssh (``workeragent.rsh``): the job's ConfigMap's, a path
        every pod has (each orted checks that its own plm_rsh_agent exists), else (outside a
        pod) a script of our own. It finds the hostfile, the token and the agents' port in its
        env (:meth:`start_coordinator`'s)."""
        if Path(self._rsh_path).is_file():
            return self._rsh_path
        script = self._scratch / "agent-rsh"
        if not script.exists():
            python = shlex.join(programs.argv(self.python, RSH_PROGRAM))
            script.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
            script.chmod(0o755)
        return str(script)

    def start_coordinator(
        self, argv: list[str], env: dict[str, str], label: str, sink: LineSink
    ) -> Proc:
        rsh = {  # (what workeragent.rsh reads: mpirun passes its env on)
            agent_rsh.HOSTFILE_ENV: self._hostfile,
            agent_rsh.TOKEN_FILE_ENV: self._token_file,
            agent_rsh.PORT_ENV: str(self.agent_port),
        }
        proc = PopenProc(label, argv, sink, env={**os.environ, **rsh, **env})
        self._coordinators.append(proc)
        return proc

    def attempt_training(self) -> bool:
        """Whether a launcher of this attempt before this one started trainers (the first
        worker's agent runs or ran one under the attempt's tag): phases 1-4 are done, and
        phase 5 re-attaches. Never without a tag."""
        if not self.reattaches or not self._hosts:
            return False
        host = self._hosts[0]
        listed = self._bounded(host, f"list {host.name}'s processes", lambda c: c.list())
        return any(p.id.startswith(f"{self._run_id}-") and "-trainer-" in p.id for p in listed)

    def release(self) -> None:
        """dglrun was told to stop (SIGTERM: its pod is being deleted). With an attempt tag
        the workers' processes are left running for the launcher that replaces this one (or,
        if none comes, for their agents to stop after the orphan grace; a restart deletes the
        worker pods anyway); what runs here (mpirun) stops."""
        if self.reattaches:
            for proc in self._procs:
                proc.detach()
            stop_all(self._coordinators)
            self._procs, self._coordinators = [], []

    def close(self) -> None:
        stop_all([*self._coordinators, *self._procs])
        self._procs, self._coordinators = [], []
        if self._own_scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
