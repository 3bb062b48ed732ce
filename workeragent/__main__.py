"""``python -m workeragent [flags] [-- CMD...]``, and the zipapp's entry point (:func:`main`).

The worker pod's main process: reads the job's token, serves the API
(:mod:`workeragent.server`) and prints ``dgl-agent: serving on HOST:PORT`` (the port it got,
for ``--port 0``), watches for orphans, and serves until SIGTERM or SIGINT (the pod is
deleted): then it stops its processes (SIGTERM, a few seconds, SIGKILL) and exits 128 + the
signal's number, as a process the signal ended: a worker pod stopped from outside (a drain, an
eviction) ends Failed, as it did with the placeholder ``sleep`` the agent replaced, so the
operator restarts the attempt rather than count the worker done. As the pod's PID 1, it also
reaps the zombies it inherits.

``CMD``, when given, is the pod template's own worker command: started at boot with the
agent's stdout and stderr (the pod's log), in the agent's workdir; its exit is logged and the
agent goes on serving (dglrun's processes do not depend on it). It is stopped with the rest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from podcontract import logline
from workeragent.procs import ProcTable, exit_code
from workeragent.server import AgentServer
from workeragent.settings import PROG, TokenFileError, parse, read_token

STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL when the agent stops


def _say(line: str) -> None:
    logline.say(f"{PROG}: {line}")


class BootCommand:
    """The pod template's worker command, started at boot beside the agent's API."""

    def __init__(self, argv: Sequence[str], workdir: str) -> None:
        self.argv = list(argv)
        self.popen: subprocess.Popen[bytes] | None = None
        try:
            self.popen = subprocess.Popen(self.argv, cwd=workdir, start_new_session=True)
        except OSError as e:
            _say(f"cannot start the worker command {self.argv[0]}: {e.strerror or e}")
            return
        _say(f"started the worker command (pid {self.popen.pid}): {' '.join(self.argv)}")
        threading.Thread(target=self._wait, name="boot-command", daemon=True).start()

    def _wait(self) -> None:
        assert self.popen is not None
        code = exit_code(self.popen.wait())
        _say(f"the worker command exited with {code} (the agent goes on serving)")

    def stop(self, grace: float) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.popen.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


def run(argv: Sequence[str]) -> int:
    """The agent, until SIGTERM or SIGINT; its exit status."""
    settings = parse(argv)
    try:
        token = read_token(settings.token_file)
    except TokenFileError as e:
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return 2
    table = ProcTable(settings.workdir, settings.buffer_bytes, settings.orphan_grace)
    try:
        server = AgentServer(table, token, host=settings.host, port=settings.port)
    except OSError as e:
        print(
            f"{PROG}: cannot listen on {settings.host}:{settings.port}: {e.strerror or e}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    stop = threading.Event()
    caught: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        caught.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    host, port = server.address
    _say(f"serving on {host}:{port}")
    threading.Thread(target=table.watch_orphans, args=(stop,), name="orphans", daemon=True).start()
    boot = BootCommand(settings.command, settings.workdir) if settings.command else None
    if os.getpid() == 1:  # (the pod's init: orphans become the agent's children)
        known = [boot.popen.pid] if boot is not None and boot.popen is not None else []
        threading.Thread(
            target=table.watch_adopted, args=(stop, known), name="zombies", daemon=True
        ).start()
    stop.wait()
    running = [p.id for p in table.list() if p.running]
    _say(
        f"stopping: {len(running)} process(es) running{': ' if running else ''}{', '.join(running)}"
    )
    server.close()
    stopper = threading.Thread(target=boot.stop if boot else None, args=(STOP_GRACE,))
    stopper.start()  # (the worker command and the processes get SIGTERM at once)
    table.stop_all(STOP_GRACE)
    stopper.join()
    _say("stopped")
    return 128 + caught[0] if caught else 0


def main() -> None:
    """The zipapp's entry point (zipapp ignores a return value: this exits)."""
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
