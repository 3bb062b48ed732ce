"""How dglrun reaches the workers: one small interface, two implementations.

* :class:`~launcher.workers.kubectl.KubectlTransport`: the operator's ``kubexec.sh`` and
  ``kubectl cp`` (inside a cluster).
* :class:`~launcher.workers.local.LocalTransport`: "worker pods" on this machine, each in
  its own network namespace (its own IP) and mount namespace (its own /dev/shm).
"""

from __future__ import annotations

import contextlib
import functools
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

from launcher.errors import LauncherError
from launcher.workers.hostfile import Host
from launcher.workers.remote import peak_mb
from podcontract import logline

#: Receives every output line of a started process, with the process's label.
LineSink = Callable[[str, str], None]


class WorkerTransportError(LauncherError, RuntimeError):
    """A transport operation failed; the message names the worker and what was tried."""


class Proc(Protocol):
    label: str

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def stop(self) -> None:
        """Stop the process and everything it started (idempotent)."""
        ...

    def last_line(self) -> str:
        """The last non-blank line of its output so far ("" when none): why it failed."""
        ...

    def last_error_line(self) -> str:
        """The last line it said as a program's error (``<prog>: error: ...``; "" when
        none): a refusal's line, wherever its stream put it among the others."""
        ...


class Transport(Protocol):
    def workers(self) -> list[Host]:
        """The worker pods in numeric order."""
        ...

    def workspace(self, worker: Host) -> str:
        """The dglrun workspace path as the worker sees it."""
        ...

    def copy_to(self, worker: Host, local: Path, remote: str) -> None:
        """Copy a file or folder to ``remote`` (created) on the worker."""
        ...

    def write_file(self, worker: Host, remote: str, content: str) -> None: ...

    def manifest(self, worker: Host, remote_dir: str) -> dict[str, tuple[int, str]]:
        """``relative path -> (size, sha256)`` of every file under ``remote_dir``."""
        ...

    def fetch(self, worker: Host, remote: str, local: Path) -> bool:
        """Copy ``remote`` back to ``local``; False when it does not exist."""
        ...

    def exists(self, worker: Host, path: str) -> bool:
        """Whether ``path`` (relative: to the worker's working folder) is a file there."""
        ...

    def start(self, worker: Host, argv: list[str], env: dict[str, str], label: str) -> Proc:
        """Start a process on the worker, in its default working folder (a pod's workdir),
        with ``env`` added; its output lines go to the transport's sink."""
        ...

    def run(self, worker: Host, argv: list[str], timeout: float) -> tuple[int, str]:
        """Run ``argv`` on the worker to completion: (exit code, its output)."""
        ...

    def kill(self, worker: Host, pidfiles: list[str]) -> None:
        """Stop the sessions recorded in these pidfiles on the worker (``launcher.workers.remote``);
        best effort: a worker that cannot be reached is reported, not raised."""
        ...

    def rsh_agent(self) -> str:
        """The remote-shell program mpirun starts its daemons with: ``<agent> <worker name>
        <command...>`` runs the command on that worker."""
        ...

    def start_coordinator(
        self, argv: list[str], env: dict[str, str], label: str, sink: LineSink
    ) -> Proc:
        """Start a process on dglrun's side (where it reaches every worker by name through
        :meth:`rsh_agent` and over the network): mpirun."""
        ...

    def close(self) -> None:
        """Stop whatever still runs and release what the transport set up."""
        ...

    def release(self) -> None:
        """dglrun is being stopped from outside (SIGTERM): a transport whose processes a
        replacing launcher can find again (the agents') leaves them running and forgets
        them, so that :meth:`close`, which follows, stops only what runs on dglrun's side;
        the others do nothing here (close stops everything)."""
        ...

    def until(self, deadline: float | None) -> None:
        """Every call from now on must end by ``deadline`` (``time.monotonic()``), or raise
        WorkerTransportError; None lifts the limit. A phase's timeout bounds its calls this way."""
        ...


def pump(stream: IO[bytes], label: str, sink: LineSink) -> threading.Thread:
    """Forward a process's output to ``sink`` line by line, from a thread of its own."""

    def run() -> None:
        for raw in iter(stream.readline, b""):
            sink(label, raw.decode("utf-8", "replace").rstrip("\n"))
        stream.close()

    t = threading.Thread(target=run, name=f"out-{label}", daemon=True)
    t.start()
    return t


# a program's one-line error (podprogram's convention, and the example's): ``<prog>: error: ...``
ERROR_LINE = re.compile(r"^\S+: error: ")
# what kubectl exec itself prints (on stderr) after a remote command that failed: never the
# process's own last words (a trainer's refusal, which names the file, comes before it)
KUBECTL_EXEC_EXIT = re.compile(r"^command terminated with exit code \d+$")


def own_words(line: str) -> bool:
    """A line the process itself said: not launcher.workers.remote's memory reports (its
    samples while the process runs, its peak once it ended), nor kubectl exec's exit line."""
    text = line.strip()
    return (
        bool(text)
        and peak_mb(line) is None
        and logline.memory_mib(line) is None
        and not KUBECTL_EXEC_EXIT.match(text)
    )


class LastWords:
    """What a process said last, from its output lines: its last line of its own
    (:func:`own_words`) and its last program error line (``<prog>: error: ...``)."""

    def __init__(self) -> None:
        self.line = ""
        self.error_line = ""

    def hear(self, line: str) -> None:
        if own_words(line):
            self.line = line.strip()
            if ERROR_LINE.match(self.line):
                self.error_line = self.line


class PopenProc:
    """A local child process in a session of its own, with its output pumped to a sink."""

    def __init__(
        self,
        label: str,
        argv: list[str],
        sink: LineSink,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.label = label
        self._on_stop = on_stop
        self._stopped = False
        self._said = LastWords()

        def keep(label: str, line: str) -> None:
            self._said.hear(line)
            sink(label, line)

        try:
            self.popen = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            raise WorkerTransportError(f"{label}: cannot start {argv[0]}: {e.strerror}") from e
        assert self.popen.stdout is not None
        self._reader = pump(self.popen.stdout, label, keep)

    def poll(self) -> int | None:
        return self.popen.poll()

    def last_line(self) -> str:
        return self._said.line

    def last_error_line(self) -> str:
        # (over kubectl exec a process's stdout and stderr travel apart: a refusal said on
        # stderr may come before a line it had printed on stdout; seen on the local cluster)
        return self._said.error_line

    def wait(self, timeout: float | None = None) -> int:
        code = self.popen.wait(timeout)
        self._reader.join(5)
        return code

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._on_stop is not None:
            self._on_stop()
        from launcher.workers.remote import kill_sessions

        if self.popen.poll() is None:
            kill_sessions([self.popen.pid], grace=3.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)
        self._reader.join(2)


@contextmanager
def time_limit(transport: Transport, timeout: float) -> Iterator[float]:
    """A phase's deadline (``time.monotonic()``; ``timeout`` 0: none, the deadline is inf),
    which also bounds every call of the transport until the block ends."""
    deadline = time.monotonic() + timeout if timeout else None
    transport.until(deadline)
    try:
        yield deadline if deadline is not None else float("inf")
    finally:
        transport.until(None)


def in_parallel(calls: list[Callable[[], None]]) -> None:
    """Run the calls in threads of their own and wait for all of them."""
    threads = [threading.Thread(target=c, daemon=True) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_everywhere(
    transport: Transport,
    hosts: list[Host],
    argv_of: Callable[[int, Host], list[str]],
    timeout: float,
) -> list[tuple[int, str] | WorkerTransportError]:
    """``argv_of(i, host)`` run on every worker at once: each one's (exit code, output), or
    the WorkerTransportError that kept it from running."""
    results: list[tuple[int, str] | WorkerTransportError] = [WorkerTransportError("not run")] * len(
        hosts
    )

    def one(i: int, host: Host) -> None:
        try:
            results[i] = transport.run(host, argv_of(i, host), timeout)
        except WorkerTransportError as e:
            results[i] = e

    in_parallel([functools.partial(one, i, h) for i, h in enumerate(hosts)])
    return results


def stop_all(procs: Iterable[Proc]) -> None:
    """Stop every process at once: a remote stop is a ``kubectl exec`` round trip, and a pod
    being deleted gives dglrun only its grace period for all of them."""
    threads = [threading.Thread(target=p.stop, daemon=True) for p in procs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def default_sink(label: str, line: str) -> None:
    """``[label] line`` on stdout, whole: each process is followed from a thread of its own."""
    logline.say(f"[{label}] {line}")
