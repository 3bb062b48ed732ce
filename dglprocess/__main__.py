"""``python -P -m dglprocess run SCRIPT [ARGS...]``: a DGL server or trainer (see the package).

Errors exit 2 with one line on stderr.
"""

from __future__ import annotations

import sys

from dglprocess import runner

PROG = "python -m dglprocess"
USAGE = f"usage: {PROG} run SCRIPT [ARGS...]"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) < 2 or argv[0] != "run":
        print(USAGE, file=sys.stderr)
        return 2
    try:
        runner.run(argv[1], argv[2:])
    except runner.RunRefused as e:
        print(f"dglprocess: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
