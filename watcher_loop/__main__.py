"""Entry point of `watcher-loop` (init-container program). Lands with issue 3."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("watcher-loop: not implemented yet (issue 3)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
