"""dglrun's log lines that a reader takes apart (``dglctl report``): spelled here once for the
writer (``launcher``) and the readers (``dgl_operator.report``, the benches).

* a phase: ``[k/5] name`` when it starts, ``[k/5] name done in 1.2s`` when it ends (``[k/5]
  name: ...`` is a note, not a phase: ``[1/5] partition: done by the partitioner pod``);
* a process's output: ``[<label>] <text>``, the label naming the pod first
  (``worker-0/trainer-0``, ``launcher``, ``partitioner``);
* a worker's pull of its partition: ``[worker-1/pull] pull: part 1: <done>/<total> bytes (40%)``;
* a step of the ParMETIS modes' ranks: ``[distpart] memory <step>: peak 812 / 790 MiB, after
  ... ; sent 12 / 11 MiB to the other ranks`` (one line per round of a step), and once they end
  ``  ranks' steps: read 0.9s, adjacency 1.6s, ...`` and ``  edge cut 1234 (1.10% of ... edges)``;
* a memory sample of the pod a process runs in: ``[<label>] memory sample: 512 MiB``,
  every :data:`SAMPLE_SECONDS` (what the pod's processes hold, DGL's shared-memory graph
  included, the page cache not: ``launcher.workers.oom.held``);
* in the copy of the log kept on a job's claim, each line starts with its UTC time in RFC 3339
  (as ``kubectl logs --timestamps`` gives the pod's): :func:`stamped`.

A program whose threads write lines (a reader thread, a memory sampler), or whose output is
shared (the ranks of one mpirun), writes each with :func:`say`, so that no two of them run
together: ``print`` writes the text and its newline apart, and a line another thread or rank
writes in between is glued to the first (dglrun then reads
``[worker-0/server-0] <first line><second line>``, the second line's label lost).

Standard library only.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import TextIO

SAMPLE_SECONDS = 10.0
SAMPLE_ENV = "DGLRUN_MEMORY_SAMPLE_SECONDS"  # 0: no samples
MEMORY_LINE = "memory sample: {mib:.0f} MiB"
_MEMORY = re.compile(r"^memory sample: (\d+) MiB$")
PHASE = re.compile(r"^\[(\d+)/(\d+)\] ([\w -]+?)(?: done in ([\d.]+)s)?$")
LABELLED = re.compile(r"^\[([^\]/]+(?:/[^\]]+)?)\] (.*)$")
PULL = re.compile(r"^pull: part (\d+): (\d+)/(\d+) bytes\b")
DISTPART_STEP = re.compile(
    r"memory (\w+): peak ([\d /]+) MiB, after [\d /]+ MiB \(ranks [\d.]+\); sent ([\d /]+) MiB"
)
RANK_STEPS = re.compile(r"ranks' steps: (.*)")
EDGE_CUT = re.compile(r"edge cut \d+ \(([\d.]+)% of (\d+) edges\)")


def memory_mib(text: str) -> float | None:
    """The figure of a memory sample's text (without its label), None for any other text."""
    m = _MEMORY.match(text.strip())
    return float(m.group(1)) if m else None


def sample_seconds(env: dict[str, str] | None = None) -> float:
    """Seconds between memory samples (:data:`SAMPLE_ENV`; 0 or a bad value: none)."""
    text = (os.environ if env is None else env).get(SAMPLE_ENV, "")
    if not text:
        return SAMPLE_SECONDS
    try:
        value = float(text)
    except ValueError:
        return 0.0
    return value if value > 0 else 0.0


def stamp(now: float | None = None) -> str:
    """The time as the kubelet stamps a log line: ``2026-11-28T16:40:01.123456Z``."""
    t = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def stamped(text: str, now: float | None = None) -> str:
    return f"{stamp(now)} {text}"


_ONE_AT_A_TIME = threading.Lock()


def say(line: str, stream: TextIO | None = None) -> None:
    """``line`` and its newline in one write, flushed, one thread at a time (``stream``:
    sys.stdout as it is at the call)."""
    out = sys.stdout if stream is None else stream
    with _ONE_AT_A_TIME:
        out.write(line + "\n")
        out.flush()
