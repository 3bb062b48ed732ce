"""The one base class of dglrun's expected errors.

Every error a step raises for something the user can act on (a bad file or flag, a worker
that cannot be reached, a graph the pods cannot hold) is a :class:`LauncherError`, whose
``str()`` is one line; dglrun reports any of them, inside a phase or outside one, as that line
and no traceback (``except LauncherError`` in launcher/console.py and launcher/runs.py).
Each keeps the built-in base it had (``ValueError`` for bad input, ``RuntimeError`` for a
failed action), so code catching those still does. The chunked format's own ChunkedError
(chunkedgraph, which imports nothing of dglrun) is turned into one of these where dglrun
reads a chunked graph.
"""

from __future__ import annotations


class LauncherError(Exception):
    """An expected failure of dglrun; ``str()`` is the one line a user sees."""


class Terminated(BaseException):
    """SIGTERM (the pod is being deleted, suspended or restarted): like Ctrl-C, it unwinds
    through every ``finally`` so that what dglrun started is stopped; but the workers'
    processes under their agents are left to a launcher that replaces this one
    (``Transport.release``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
