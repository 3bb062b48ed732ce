"""``dglrun``: partition -> deliver -> dispatch -> configure -> train, on the operator's pods.

Where it runs decides what it does (``DGL_OPERATOR_PHASE_ENV``, set by the operator):

* ``Partitioner`` (the partitioner pod): [1/5] partition, [2/5] deliver: serve the parts to the
  workers over HTTP until the launcher says they all have theirs (``--partition-transfer
  http``, the default), or copy the dataset into the launcher pod (``kubectl``).
* unset (the launcher pod): [3/5] dispatch part i to worker i (each worker pulls its part
  straight from the partitioner; with ``kubectl``, copied from here), [4/5] write ip_config on
  every worker, [5/5] start DGL servers and trainers on every worker and wait for all.
* ``Launcher_Workload`` (Skip mode): run the training entry point alone.
* ``--transport local``: all five phases on this machine, with one network namespace per
  worker (what ``make demo`` and the pipeline tests use).

How the graph is partitioned (``--partition-mode``, in a DGLJob from ``spec.partitionMode``):
``DGL-API`` runs the partition entry point; ``ParMETIS`` runs ``--num-ranks`` MPI ranks of
``python -m distpart`` on the partitioner's chunked graph (``--chunked-graph``); in
``DistParMETIS`` the launcher runs one rank on every worker, and each worker writes its own
partition (nothing is copied): phase 1 happens in the launcher, phase 2 has nothing to do.

Its options: launcher/options.py; the whole runs: launcher/runs.py (each role's phases, in
launcher/phases.py and launcher/training/train.py). dglrun imports only the standard library, so
``dglrun --help`` is instant; DGL and torch are imported only by the entry points it starts.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

from launcher import programs
from launcher.errors import Terminated
from launcher.options import parse
from launcher.runs import run


def _as_user_namespace_root(argv: Sequence[str] | None) -> None:
    """The local transport without root: run dglrun again as "root" of a user namespace of
    its own (returns only if that cannot be done; dglrun then says why)."""
    from launcher.workers.local import USERNS_ENV, user_namespace_argv, user_namespaces_work

    if os.environ.get(USERNS_ENV) or user_namespaces_work() is not None:
        return
    args = list(sys.argv[1:] if argv is None else argv)
    command = user_namespace_argv(programs.argv(sys.executable, programs.CLI, *args))
    sys.stdout.flush()
    os.execvpe(command[0], command, {**programs.local_env(os.environ), USERNS_ENV: "1"})


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse(argv)
    if opts.transport == "local" and os.geteuid() != 0:
        _as_user_namespace_root(argv)

    def terminate(signum: int, _frame: object) -> None:
        signal.signal(signum, signal.SIG_IGN)  # once: the clean-up must not be interrupted
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, terminate)
    return run(opts)


if __name__ == "__main__":
    sys.exit(main())
