"""The one reader of the JSON files dglrun finds on the job's claim, bounded.

Anything on the claim may have been written by another job on the same storage (a shared
cache), or planted: a cache entry's index, a run's ``partitions.json``, a partition set's
config. :func:`read` takes at most :data:`LIMIT` bytes (a larger file is refused unparsed),
checks the nesting depth without recursion (strings skipped, brackets counted: at most
:data:`DEPTH`) before ``json.loads``, and the top-level type (an object, unless said). Whatever
is refused is an :class:`Unreadable` (a ``ValueError``) whose ``str()`` names the file and why:
never a ``RecursionError``, ``MemoryError`` or a traceback. :func:`entry` is the same as "no
entry": None, with one line naming the file in dglrun's log. JSON only: nothing read from
the claim runs code. Standard library only (dglrun's layer).
"""

from __future__ import annotations

import json
from pathlib import Path

from launcher.errors import LauncherError
from podcontract.jsontext import too_deep

# the bytes a file on the claim may hold to be read (dglrun's own files are far smaller: an
# entry's index lists a partition set's files, a run's record a few keys)
LIMIT = 16 * 1024 * 1024
# how deeply arrays and objects may nest (dglrun's files nest a few levels)
DEPTH = 64


class Unreadable(LauncherError, ValueError):
    """A file on the claim that is refused: too large, too deep, not JSON, or not of the
    expected shape; ``str()`` names it and says why."""


def parse(
    text: str | bytes,
    what: str,
    kind: type = dict,
    *,
    limit: int = LIMIT,
    depth: int = DEPTH,
) -> object:
    """``text`` as JSON of the type ``kind``; :class:`Unreadable` naming ``what`` (a file, a
    command's output line) when it is longer than ``limit``, nests deeper than ``depth``, is
    not JSON or not a ``kind``."""
    if len(text) > limit:
        raise Unreadable(f"{what} is over {limit} bytes: not read")
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError:
            raise Unreadable(f"{what} is not UTF-8 text") from None
    if too_deep(text, depth):
        raise Unreadable(f"{what} nests more than {depth} levels deep: not read")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:  # (RecursionError: the depth check's backstop)
        raise Unreadable(f"{what} is not JSON ({str(e)[:200]})") from None
    if not isinstance(doc, kind):
        names: dict[type, str] = {dict: "an object", list: "an array"}
        want = names.get(kind, kind.__name__)
        raise Unreadable(f"{what} is not {want} (a {type(doc).__name__})")
    return doc


def read(path: Path | str, kind: type = dict, *, limit: int = LIMIT, depth: int = DEPTH) -> object:
    """The file ``path`` as JSON of the type ``kind``: :class:`Unreadable` when it is refused
    (see :func:`parse`) or cannot be read; ``FileNotFoundError`` when it does not exist."""
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)  # (one more byte: a larger file is seen to be larger)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise Unreadable(f"{path} cannot be read ({e.strerror or e})") from None
    return parse(raw, str(path), kind, limit=limit, depth=depth)


def entry(
    path: Path | str, kind: type = dict, *, limit: int = LIMIT, depth: int = DEPTH
) -> object | None:
    """:func:`read`, with every failure as "no entry": None when the file does not exist
    (silently) or is refused (one line in dglrun's log naming it and why)."""
    try:
        return read(path, kind, limit=limit, depth=depth)
    except FileNotFoundError:
        return None
    except Unreadable as e:
        print(f"dglrun: warning: {e}; taken as no entry", flush=True)
        return None
