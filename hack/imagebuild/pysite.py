"""site-packages trees staged for a layer: pip's environment, tidying, byte-compiling."""

from __future__ import annotations

import compileall
import os
import py_compile
import shutil
import sys
from pathlib import Path

from imagebuild.host import run


def pip_install(target: Path, *args: str) -> None:
    """``pip install --target target`` of ``args`` with this interpreter (Python 3.11, the
    base's ABI), quietly, without byte-compiling (:func:`compile_tree` does it)."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target"]
    run([*cmd, str(target), *args], env=pip_env())


def pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def tidy_site(site: Path) -> None:
    """Drop what pip --target leaves that names the build host: scripts (host shebangs; our
    wrappers replace them) and direct_url.json (the wheel's temporary path)."""
    shutil.rmtree(site / "bin", ignore_errors=True)
    for direct in site.glob("*.dist-info/direct_url.json"):
        record = direct.parent / "RECORD"
        if record.exists():
            kept = [
                ln
                for ln in record.read_text().splitlines(keepends=True)
                if not ln.startswith(f"{direct.parent.name}/direct_url.json,")
            ]
            record.write_text("".join(kept))
        direct.unlink()
    for cache in sorted(site.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)


def compile_tree(site: Path, image_path: str) -> None:
    """Byte-compile ``site`` as it will sit at ``image_path``: unchecked-hash pycs (valid
    whatever the files' mtimes) that name the in-image paths, not the staging directory."""
    compileall.compile_dir(
        str(site),
        ddir=image_path,
        quiet=2,  # like pip: files that do not compile (py2 leftovers, templates) are skipped
        workers=os.cpu_count() or 1,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
