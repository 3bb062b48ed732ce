"""The CPU image's stubs (hack/imagebuild/cudastub.py) on small libraries built here: a kept
library that needs a left-out one (a versioned function, a typeinfo and a vtable bound at load
time) loads against the stub, and calling into the stub reaches c10's check-failure function
with the hint, as torch's would. Needs gcc and binutils (what the image build needs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.images.helpers import which
from tests.support.paths import REPO
from tests.support.prerequisites import unavailable

# the left-out library: a versioned function, a class's typeinfo and vtable
REAL = """
void real_f(void) {}
struct ti { const void *vptr; const char *name; };
const struct ti real_ti __asm__("_ZTIN3foo3BarE") = { 0, "N3foo3BarE" };
const void *const real_vt[5] __asm__("_ZTVN3foo3BarE") = { 0, 0, 0, 0, 0 };
"""
REAL_MAP = "REAL_1 { global: real_f; _ZTIN3foo3BarE; _ZTVN3foo3BarE; local: *; };\n"
# the kept library: binds the typeinfo and vtable when it loads, calls the function when asked
KEPT = """
extern void real_f(void);
extern const char bar_ti[] __asm__("_ZTIN3foo3BarE");
extern const void *const bar_vt[] __asm__("_ZTVN3foo3BarE");
const void *const seen[2] = { bar_ti, bar_vt };
int kept_loaded(void) { return seen[0] != 0 && seen[1] != 0; }
void kept_calls(void) { real_f(); }
"""
# c10's check failure, as a C function that prints what it got and exits 3
C10 = """
#include <stdio.h>
#include <stdlib.h>
void fail(const char *f, const char *file, unsigned line, const char *msg)
    __asm__("_ZN3c106detail14torchCheckFailEPKcS2_jS2_");
void fail(const char *f, const char *file, unsigned line, const char *msg) {
    fprintf(stderr, "%s|%s\\n", file, msg);
    exit(3);
}
"""
LOAD = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print(lib.kept_loaded(), flush=True)
if len(sys.argv) > 2:
    lib.kept_calls()
"""


def gcc(*args: str, cwd: Path) -> None:
    subprocess.run(["gcc", "-shared", "-fPIC", *args], cwd=cwd, check=True, timeout=120)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    if which("gcc") is None or which("nm") is None or which("readelf") is None:
        unavailable("gcc and binutils (nm, readelf) build the stubs: hack/tools.sh gcc")
    site = tmp_path / "site"
    (site / "torch/lib").mkdir(parents=True)
    (site / "pkg").mkdir()
    for name, text in (("real.c", REAL), ("real.map", REAL_MAP), ("kept.c", KEPT), ("c10.c", C10)):
        (tmp_path / name).write_text(text)
    gcc("-o", str(site / "torch/lib/libc10.so"), "c10.c", cwd=tmp_path)
    real = site / "pkg/libreal.so"
    gcc("-Wl,-soname,libreal.so", "-Wl,--version-script=real.map", "-o", str(real), "real.c",
        cwd=tmp_path)  # fmt: skip
    gcc("-o", str(site / "pkg/libkept.so"), "kept.c", f"-L{site / 'pkg'}", "-l:libreal.so",
        "-Wl,-rpath,$ORIGIN", cwd=tmp_path)  # fmt: skip
    return site


def stub(site: Path, *libraries: Path, hint: str = "not in this CPU image") -> Any:
    """hack/imagebuild/cudastub.py's command line: what it stubbed, or its error line."""
    proc = subprocess.run(
        [sys.executable, "-m", "imagebuild.cudastub", str(site), hint, *map(str, libraries)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "hack")},
    )  # fmt: skip
    return json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr.strip()


def load(site: Path, *call: str) -> subprocess.CompletedProcess[str]:
    lib = str(site / "pkg/libkept.so")
    return subprocess.run(
        [sys.executable, "-c", LOAD, lib, *call], capture_output=True, text=True, timeout=60
    )


def test_a_kept_library_loads_against_the_stub_and_a_call_reaches_c10(site: Path) -> None:
    real = site / "pkg/libreal.so"
    assert load(site).stdout.strip() == "1"
    size = real.stat().st_size
    assert stub(site, real) == {
        "libreal.so": {
            "users": ["pkg/libkept.so"],
            "symbols": {"real_f": "REAL_1", "_ZTIN3foo3BarE": "REAL_1", "_ZTVN3foo3BarE": "REAL_1"},
        }
    }
    assert real.stat().st_size != size  # the stub, in its place
    loaded = load(site)
    assert (loaded.returncode, loaded.stdout.strip()) == (0, "1"), loaded.stderr
    called = load(site, "call")
    assert called.returncode == 3, called.stderr
    assert called.stderr.strip() == "libreal.so|real_f (libreal.so): not in this CPU image"


def test_a_left_out_library_nothing_needs_is_only_removed(site: Path) -> None:
    (site / "pkg/libkept.so").unlink()
    assert stub(site, site / "pkg/libreal.so") == {}
    assert not (site / "pkg/libreal.so").exists()


def test_an_object_it_cannot_stand_in_for_is_one_line(site: Path, tmp_path: Path) -> None:
    """A data symbol that is neither a typeinfo nor a vtable: the error names it."""
    (tmp_path / "table.c").write_text("int some_table[16] = { 1 };\n")
    gcc("-o", str(site / "pkg/libtable.so"), "table.c", cwd=tmp_path)
    (tmp_path / "user.c").write_text(
        "extern int some_table[]; int *user(void) { return some_table; }\n"
    )
    gcc("-o", str(site / "pkg/libuser.so"), "user.c", f"-L{site / 'pkg'}", "-l:libtable.so",
        cwd=tmp_path)  # fmt: skip
    error = stub(site, site / "pkg/libtable.so")
    assert error.startswith("cudastub: no stand-in for some_table (nm type D, 64 bytes)"), error
    assert len(error.splitlines()) == 1
