"""Which failed DGL process dglrun names when training fails.

When one trainer dies, its peers die of it: their next collective fails with gloo's
"Connection reset by peer" (or "closed by peer"), often within the same few milliseconds. The
first exit dglrun happens to notice (it polls the processes in worker order) is then not
necessarily the cause, and naming worker-0's reset instead of worker-1's crash sends the user
to the wrong pod's logs.

So a failure whose last line says that a peer went away is a *consequence*. The cause is the
first failure that is not one; when only consequences have been seen, dglrun waits up to
:data:`CAUSE_WINDOW` seconds for the cause to exit too, and names the first consequence if it
does not (a peer that hung rather than died, say).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

CAUSE_WINDOW = 3.0  # seconds to wait for the cause once only consequences have failed

# a process's last line that says it died because a peer went away (lower case)
PEER_GONE = (
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
)

F = TypeVar("F")


def is_consequence(last_line: str) -> bool:
    """Whether a failed process's last line says it died because a peer went away."""
    line = last_line.lower()
    return any(words in line for words in PEER_GONE)


def cause(failures: Sequence[F], last_line: Callable[[F], str]) -> F:
    """The failure to name, of those seen so far in the order seen: the first that is not a
    consequence, else the first."""
    if not failures:
        raise ValueError("no failures to choose from")
    return next((f for f in failures if not is_consequence(last_line(f))), failures[0])
