"""``python -P -m launcher.workers.remote``: the small helper dglrun runs on the far side of
``kubectl exec``.

* ``run --pidfile P -- CMD...`` starts CMD in a session of its own, records the session id in
  P, and exits with CMD's status. Killing the local ``kubectl exec`` does not stop a remote
  process; this lets dglrun stop it, and every process it spawned, by session. ``{rank}`` in
  P becomes the MPI rank (``OMPI_COMM_WORLD_RANK``): every rank of one ``mpirun`` command line
  gets a pidfile of its own. When CMD ends, a last line on stderr gives its peak resident
  memory (:data:`PEAK_LINE`: the largest of CMD and the children it waited for), which dglrun
  sets beside its memory plan. If the kernel killed CMD for memory (SIGKILL while the
  container's OOM-kill count rose, :mod:`launcher.workers.oom`), a line before it says so, naming
  the pod. ``--keep-session`` runs CMD in this process's session instead (the local transport
  stops a whole session at once). While CMD runs, a line on stderr every 10 s gives the pod's
  memory (``podcontract.logline``: what ``dglctl report`` plots).
* ``kill --pidfile P... [--grace S]`` sends SIGTERM to each recorded session, then SIGKILL.
  A kill may arrive before ``run`` has recorded its session: it then leaves ``P.cancelled``,
  which ``run`` checks after recording, so the process is stopped whichever comes first.
* ``manifest DIR`` prints ``{"relative/path": [size, sha256], ...}`` for verifying copies.

Standard library and podcontract only: worker images carry dglrun but nothing else of the
operator.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from launcher import programs
from launcher.workers import oom
from podcontract import logline


def _manifest(root: Path) -> dict[str, list[object]]:
    # Local import keeps `run` (the hot path) free of hashlib work.
    from launcher.checksums import manifest

    return {k: [size, digest] for k, (size, digest) in manifest(root).items()}


RANK_ENV = "OMPI_COMM_WORLD_RANK"
POD_ENV = "KUBERNETES_SERVICE_HOST"  # set in every pod: memory is sampled there only
PEAK_LINE = "launcher.remote: peak memory {mib:.1f} MiB"
PEAK_RE = re.compile(r"^launcher\.remote: peak memory ([0-9.]+) MiB$")
# How an MPI rank's command ended, when not with 0: mpirun's own report of it is not always
# printed (it may exit 255 with none), so dglrun names the rank from this line as well.
RANK_END_LINE = "launcher.remote: MPI rank {rank} {how}"
# said as a rank's command starts: dglrun knows which ranks mpirun's daemons did start (a
# daemon that never calls back leaves mpirun waiting for it forever)
RANK_START_LINE = "launcher.remote: MPI rank {rank} started"
RANK_START_RE = re.compile(r"launcher\.remote: MPI rank (\d+) started$")
RANK_END_RE = re.compile(
    r"launcher\.remote: MPI rank (\d+) (exited with code \d+|was killed by \w+)"
)


def peak_mb(line: str) -> float | None:
    """The figure of a :data:`PEAK_LINE`, None for any other line."""
    m = PEAK_RE.match(line.strip())
    return float(m.group(1)) if m else None


def expand_pidfile(pidfile: Path, env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    text = str(pidfile)
    return Path(text.replace("{rank}", env.get(RANK_ENV, "0"))) if "{rank}" in text else pidfile


def _run(pidfile: Path, cmd: list[str], keep_session: bool = False) -> int:
    pidfile = expand_pidfile(pidfile)
    if not cmd:
        print("launcher.remote run: no command given", file=sys.stderr)
        return 2
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    cancelled = _cancel_marker(pidfile)
    if cancelled.exists():
        return 128 + signal.SIGTERM
    watch = oom.Watch()
    try:
        proc = subprocess.Popen(cmd, start_new_session=not keep_session)
    except OSError as e:
        print(f"launcher.remote run: cannot start {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 127
    pidfile.write_text(str(proc.pid))
    rank = os.environ.get(RANK_ENV)
    if rank is not None:
        say(RANK_START_LINE.format(rank=rank))

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            if keep_session:
                proc.send_signal(signum)
            else:
                os.killpg(proc.pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    if cancelled.exists():  # a kill came before the pidfile: it is ours to carry out
        kill_sessions([proc.pid], grace=5.0)
    # the pod's memory while CMD runs (in a pod only, not under dglrun's local transport)
    sampling = oom.sample_memory(say) if os.environ.get(POD_ENV) else threading.Event()
    try:
        code = proc.wait()
    finally:
        sampling.set()
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
    if watch.killed(code):
        say(oom.line())
    if rank is not None and code != 0:
        how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited with code {code}"
        say(RANK_END_LINE.format(rank=rank, how=how))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    say(PEAK_LINE.format(mib=peak))
    return 128 - code if code < 0 else code


def say(line: str) -> None:
    """A line on stderr (the memory sampler's thread says its lines beside this one's)."""
    logline.say(line, sys.stderr)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_sessions(pgids: list[int], grace: float) -> None:
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pgids):
        time.sleep(0.05)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _cancel_marker(pidfile: Path) -> Path:
    return pidfile.with_name(pidfile.name + ".cancelled")


def _read_pgid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def kill_pidfiles(pidfiles: list[Path], grace: float = 5.0) -> int:
    """Stop the sessions recorded in ``pidfiles`` (and cancel runs that have not recorded yet)."""
    pgids = []
    for pf in pidfiles:
        pgid = _read_pgid(pf)
        if pgid is None:
            # not started yet, or finished (the file goes with the process): make sure a
            # `run` still starting stops at once, then look again in case it just recorded
            with contextlib.suppress(OSError):
                pf.parent.mkdir(parents=True, exist_ok=True)
                _cancel_marker(pf).touch()
            pgid = _read_pgid(pf)
        if pgid is not None:
            pgids.append(pgid)
    kill_sessions(pgids, grace)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=programs.prog(programs.REMOTE))
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--pidfile", required=True, type=Path)
    run.add_argument("--keep-session", action="store_true")
    run.add_argument("command", nargs=argparse.REMAINDER)
    kill = sub.add_parser("kill")
    kill.add_argument("--pidfile", required=True, type=Path, nargs="+")
    kill.add_argument("--grace", type=float, default=5.0)
    man = sub.add_parser("manifest")
    man.add_argument("dir", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "run":
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        return _run(a.pidfile, cmd, a.keep_session)
    if a.cmd == "kill":
        return kill_pidfiles(a.pidfile, a.grace)
    if not a.dir.is_dir():
        print(f"launcher.remote manifest: {a.dir} is not a directory", file=sys.stderr)
        return 1
    json.dump(_manifest(a.dir), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
