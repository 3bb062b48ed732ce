"""``python -m workeragent.install DIR``: write the agent as one file, ``DIR/dgl-agent.pyz``.

Each worker pod's init container runs this from the operator's image into the pod's agent
folder (an emptyDir); the worker's container then runs ``python3 /opt/dgl-agent/dgl-agent.pyz``
with the worker image's own Python, which has none of this project installed. The zipapp holds
the sources of ``workeragent`` and ``podcontract`` (standard library only, Python 3.9+) and
starts ``workeragent.__main__:main``. It is written to a temporary file beside the target and
renamed (a reader never sees half an archive), mode 0755.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import zipapp
from collections.abc import Sequence
from pathlib import Path

import podcontract as pc

PROG = "dgl-agent-install"
ARCHIVE = os.path.basename(pc.AGENT_ZIPAPP)
PACKAGES = ("workeragent", "podcontract")
ENTRY = "workeragent.__main__:main"
INTERPRETER = "/usr/bin/env python3"


def _stage(staging: Path) -> None:
    """Each package's ``.py`` files under ``staging/<package>/``."""
    for package in PACKAGES:
        init = importlib.import_module(package).__file__
        assert init is not None
        root = Path(init).parent
        for source in sorted(root.rglob("*.py")):
            if "__pycache__" in source.parts:
                continue
            target = staging / package / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def build(folder: str) -> Path:
    """Write ``folder/dgl-agent.pyz``; its path."""
    os.makedirs(folder, exist_ok=True)
    target = Path(folder) / ARCHIVE
    with tempfile.TemporaryDirectory() as staging:
        _stage(Path(staging))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{ARCHIVE}.")
        os.close(fd)
        try:
            zipapp.create_archive(
                staging, tmp, interpreter=INTERPRETER, main=ENTRY, compressed=True
            )
            os.chmod(tmp, 0o755)
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    return target


def run(argv: Sequence[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(f"usage: python -m workeragent.install DIR (writes DIR/{ARCHIVE})", file=sys.stderr)
        return 2
    try:
        target = build(argv[0])
    except OSError as e:
        print(f"{PROG}: cannot write {argv[0]}/{ARCHIVE}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(
        f"{PROG}: wrote {target} ({target.stat().st_size} bytes: {', '.join(PACKAGES)}; "
        f"entry {ENTRY}; runs with python3 >= 3.9)",
        flush=True,
    )
    return 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
