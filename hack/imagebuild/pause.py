"""The pause layer: a static C program (pause.c beside this module) for pod sandboxes."""

from __future__ import annotations

from pathlib import Path

from imagebuild import oci
from imagebuild.context import Context
from imagebuild.host import find_tool, run

PAUSE_SOURCE = Path(__file__).with_name("pause.c")
PAUSE_CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Werror")


def pause_layer(ctx: Context) -> oci.Layer:
    """/pause: PAUSE_SOURCE built with this host's gcc, statically linked and stripped."""
    gcc = find_tool("gcc")
    version = run([gcc, "--version"]).splitlines()[0]
    source = PAUSE_SOURCE.read_text()
    key_doc = {"kind": "pause", "source": source, "cflags": list(PAUSE_CFLAGS), "gcc": version}

    def make() -> oci.Layer:
        with ctx.workdir("pause") as work:
            (work / "pause.c").write_text(source)
            run([gcc, *PAUSE_CFLAGS, "-o", "pause", "pause.c"], cwd=work)
            binary = work / "pause"
            info = oci.tar_info("pause", mode=0o755, size=binary.stat().st_size, mtime=ctx.epoch)
            return ctx.store.write_layer(
                [(info, binary)], gzip_it=True, created_by="pause (static C, gcc -static)"
            )

    return ctx.layer("pause", key_doc, make)
