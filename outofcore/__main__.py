"""``python -m outofcore``: what dglrun starts for out-of-core workers.

    python -P -m outofcore run SCRIPT [ARGS...]   a DGL server or trainer: install the patch,
                                                  then run SCRIPT as ``python SCRIPT ARGS``
    python -P -m outofcore export PART_CONFIG     write every part's node features as .npy
                                                  (the DGL-API path, after partition_graph)

A server first checks that its part has feature files (``DGL_CONF_PATH``, ``DGL_SERVER_ID``,
``DGL_NUM_SERVER`` as dglrun sets them): a partition written without them fails here with one
line naming the file, before DGL starts. Errors exit 2 with one line on stderr.
"""

from __future__ import annotations

import os
import sys
import time

from dglprocess import runner
from outofcore import layout

PROG = "python -m outofcore"
USAGE = f"usage: {PROG} run SCRIPT [ARGS...] | {PROG} export PART_CONFIG"


class _Refused(Exception):
    pass


def _server_part() -> tuple[str, int] | None:
    """This process's partition config and part id, when it is a DGL server."""
    if os.environ.get("DGL_ROLE") != "server":
        return None
    config = os.environ.get("DGL_CONF_PATH", "")
    try:
        server, per_machine = int(os.environ["DGL_SERVER_ID"]), int(os.environ["DGL_NUM_SERVER"])
    except (KeyError, ValueError):
        return None
    return (config, server // max(per_machine, 1)) if config else None


def run(script: str, args: list[str]) -> None:
    from outofcore import buffer, patch

    part = _server_part()
    if part is not None:
        try:
            files = layout.node_feat_files(part[0])
            if part[1] in files:
                layout.read_index(files[part[1]].parent)
        except layout.LayoutError as e:
            raise _Refused(str(e)) from None
    try:
        patch.install()
    except patch.OutOfCoreError as e:
        raise _Refused(str(e)) from None
    try:
        buffer.order()  # (a bad order is told before DGL starts)
        runner.run(script, args)
    except (runner.RunRefused, buffer.BufferError) as e:
        raise _Refused(str(e)) from None


def export(config: str) -> None:
    """Each part's node_feat.dgl, also as .npy (one part in memory at a time)."""
    try:  # (before DGL's import: a bad config is told at once)
        parts = layout.node_feat_files(config)
    except layout.LayoutError as e:
        raise _Refused(str(e)) from None
    from dgl.data.utils import load_tensors

    for part, feats_file in sorted(parts.items()):
        started = time.perf_counter()
        try:
            feats = load_tensors(str(feats_file))
        except Exception as e:  # DGL raises its own errors for a bad file
            raise _Refused(f"{feats_file}: cannot load the node features: {e}") from None
        layout.write(feats_file.parent, feats)
        size = layout.nbytes(feats_file.parent)
        del feats
        print(
            f"out-of-core: part {part}: {size / 2**20:.1f} MiB of node features as .npy in "
            f"{time.perf_counter() - started:.1f}s",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        print(__doc__)
        return 0
    try:
        if len(argv) >= 2 and argv[0] == "run":
            run(argv[1], argv[2:])
        elif len(argv) == 2 and argv[0] == "export":
            export(argv[1])
        else:
            print(USAGE, file=sys.stderr)
            return 2
    except _Refused as e:
        print(f"out-of-core: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
