"""out_of_core_bench.py's interpreter for dglrun's worker processes (``--python``): run with
the DGL interpreter, it puts itself into the memory cgroup of its worker (the bench made
``$OOC_BENCH_CGROUPS/<host name>``), drops its partition's pages from the page cache (a DGL
server, before it starts: what dispatch copied must not count as already read), runs
``python ARGS...`` as a child and, when it ends, records the child's bytes read from disk
and peak RSS (``wait4``) in ``$OOC_BENCH_RECORDS/<host>-<pid>.json``. The child runs under
bench/ooc_profile.py, which records where its time went."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path


def evict(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def main() -> int:
    host = socket.gethostname()
    group = Path(os.environ.get("OOC_BENCH_CGROUPS", "/nonexistent")) / host
    if group.is_dir():
        (group / "cgroup.procs").write_text(str(os.getpid()))
    config = os.environ.get("DGL_CONF_PATH")
    if os.environ.get("DGL_ROLE") == "server" and config:
        evict(Path(config).parent)
    script = next((a for a in sys.argv[1:] if a.endswith(".py")), None)
    if script and "-m" not in sys.argv[1:]:  # what `python SCRIPT` puts first on the path
        folder = str(Path(script).resolve().parent)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (folder, os.environ.get("PYTHONPATH")) if p
        )
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-m", "bench.ooc_profile", *sys.argv[1:]])
    _, status, usage = os.wait4(pid, 0)
    records = os.environ.get("OOC_BENCH_RECORDS")
    if records and os.environ.get("DGL_ROLE"):
        doc = {
            "host": host,
            "role": os.environ["DGL_ROLE"],
            "read_bytes": usage.ru_inblock * 512,
            "peak_rss_mib": usage.ru_maxrss / 1024,
        }
        Path(records, f"{host}-{os.getpid()}.json").write_text(json.dumps(doc))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
