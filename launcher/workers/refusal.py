"""A process of the job that refused a file it was to load from the claim.

A checkpoint or a model on the claim may have been written by anybody who mounts it: the
example's trainers and ``evaluate.py`` load them weights-only, and refuse one that holds more
than tensors and plain values (a pickle that would run code), naming the file. Such a process
exits with podcontract's ``REFUSED_EXIT_CODE``, its last line saying which file and why (the
contract of a training entry point: docs/user-guide.md).

Every attempt would read the same file and refuse it again, so a restart cannot help: dglrun
ends with a termination message that starts with podcontract's ``REFUSED_PREFIX`` and quotes
that line (:func:`describe`), and the operator fails the job at once (``FileRefused``).
An exit with that code but no line to quote is an ordinary failure.
"""

from __future__ import annotations

from podcontract import REFUSED_EXIT_CODE, REFUSED_PREFIX

QUOTED = 1000  # characters of the process's line quoted (its start: the file is named first)


def describe(code: int | None, last_line: str, who: str) -> str | None:
    """dglrun's line for the process ``who`` that exited with ``code``, ``last_line`` its last
    line: ``refused: <that line> (<who> exited with code 65 ...)``; None unless the process
    refused a file (:data:`REFUSED_EXIT_CODE` and a line saying which)."""
    # one line of printable characters, whatever it held (its words may be a payload's)
    quote = "".join(c if c.isprintable() else "?" for c in " ".join(last_line.split()))
    if code != REFUSED_EXIT_CODE or not quote:
        return None
    if len(quote) > QUOTED:
        quote = quote[: QUOTED - 3] + "..."
    return (
        f"{REFUSED_PREFIX}{quote} ({who} exited with code {code}: it refused a file it was to "
        "load, and would refuse it again on a restart)"
    )
