"""Stand-ins for the CUDA libraries the CPU image leaves out of torch.

The PyPI torch wheel (the only torch 2.2.1 for x86_64 this machine reaches) is built with CUDA:
libtorch.so, libshm.so, libtorch_python.so and torch_shm_manager list libtorch_cuda.so
(855 MB, which needs cuDNN, cuBLAS, NCCL, ... : 2.8 GB of nvidia-* wheels) as DT_NEEDED, and
libtorch_python.so also libcudnn.so.8. Removing the DT_NEEDED entries is not enough:
libtorch_python.so binds some of their symbols when it loads (a typeinfo, a vtable, member
function addresses: R_X86_64_64 and GLOB_DAT relocations), so ``import torch`` would fail.

:func:`stub_dropped` replaces each left-out library that a kept ELF file still needs, at its own
path, by a small shared library with the same name that defines exactly the symbols the kept
files import from it (read with ``nm -D``; their symbol versions kept): a function throws
``c10::Error`` (``c10::detail::torchCheckFail``, so Python sees a RuntimeError naming the
symbol), a typeinfo is a ``__class_type_info`` with the class's name, a vtable has the real
one's size with every slot throwing. Loading such a stub registers no CUDA kernels or hooks, so
torch behaves as a CPU build: ``torch.cuda.is_available()`` is False (through the real
libc10_cuda.so and libcudart.so.12, which are kept: with no driver they count no device).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from imagebuild.host import BuildError, find_tool, run

ELF_MAGIC = b"\x7fELF"
# c10::detail::torchCheckFail(const char *func, const char *file, uint32_t line, const char *msg)
CHECK_FAIL = "_ZN3c106detail14torchCheckFailEPKcS2_jS2_"
C10 = "libc10.so"  # defines CHECK_FAIL: the stubs need it
CXX_CLASS_TYPE_INFO = "_ZTVN10__cxxabiv117__class_type_infoE"  # libstdc++
STUB_CFLAGS = ("-shared", "-fPIC", "-fexceptions", "-O1", "-Wall", "-Werror", "-s")
FUNCTION_TYPES = set("TWi")  # nm: text, weak (function), indirect function
OBJECT_TYPES = set("DVRBu")  # nm: data, weak object, read-only, bss, unique global


@dataclass
class Wanted:
    """What kept files import from one left-out library: symbol -> version ('' if none)."""

    path: Path
    symbols: dict[str, str] = field(default_factory=dict)
    users: set[str] = field(default_factory=set)


def is_elf(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def needed(path: Path) -> list[str]:
    out = run([find_tool("readelf"), "-dW", str(path)])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def dynamic_symbols(path: Path, *, defined: bool) -> dict[str, tuple[str, str, int]]:
    """``nm -D`` of ``path``: name -> (nm type letter, version, size) of its defined or its
    undefined dynamic symbols."""
    which = "--defined-only" if defined else "--undefined-only"
    out = run([find_tool("nm"), "-D", "-S", which, str(path)])
    symbols: dict[str, tuple[str, str, int]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if defined and len(parts) == 4:
            size, kind, name = int(parts[1], 16), parts[2], parts[3]
        elif defined and len(parts) == 3:
            size, kind, name = 0, parts[1], parts[2]
        else:
            size, kind, name = 0, parts[-2], parts[-1]
        base, _, version = name.partition("@")
        symbols[base] = (kind, version.lstrip("@"), size)
    return symbols


def wanted_from(site: Path, dropped: Iterable[Path]) -> dict[str, Wanted]:
    """For each left-out ELF library (by file name) that a kept ELF file under ``site`` lists as
    DT_NEEDED: the symbols those files import that it defines."""
    by_name = {p.name: p for p in dropped}
    gone = set(dropped)
    wanted: dict[str, Wanted] = {}
    exports: dict[str, dict[str, tuple[str, str, int]]] = {}
    for path in sorted(site.rglob("*")):
        if path in gone or not is_elf(path):
            continue
        names = [n for n in needed(path) if n in by_name]
        if not names:
            continue
        imports = dynamic_symbols(path, defined=False)
        for name in names:
            if name not in exports:
                exports[name] = dynamic_symbols(by_name[name], defined=True)
            w = wanted.setdefault(name, Wanted(by_name[name]))
            w.users.add(path.relative_to(site).as_posix())
            for symbol, (_, version, _) in imports.items():
                if symbol in exports[name]:
                    w.symbols[symbol] = version
    return wanted


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def stub_source(
    soname: str, symbols: dict[str, str], exports: dict[str, tuple[str, str, int]], hint: str
) -> str:
    """C source of the stub for ``soname``: ``symbols`` defined as :mod:`this module <cudastub>`
    describes (``exports``: the real library's nm types and sizes)."""
    lines = [
        f"/* {soname}: a stand-in written by hack/build_images.py (imagebuild.cudastub) */",
        "void check_fail(const char *, const char *, unsigned, const char *)"
        f' __asm__("{CHECK_FAIL}") __attribute__((noreturn));',
        "static void missing(const char *message) __attribute__((noreturn));",
        "static void missing(const char *message) {",
        f'    check_fail("", {c_string(soname)}, 0, message);',
        "}",
        "static void missing_virtual(void) __attribute__((unused));",
        f"static void missing_virtual(void) {{ missing({c_string(f'{soname}: {hint}')}); }}",
        f'extern const char class_type_info[] __asm__("{CXX_CLASS_TYPE_INFO}");',
    ]
    for i, symbol in enumerate(sorted(symbols)):
        kind, _, size = exports[symbol]
        if kind in FUNCTION_TYPES:
            lines += [
                f'void f{i}(void) __asm__("{symbol}");',
                f"void f{i}(void) {{ missing({c_string(f'{symbol} ({soname}): {hint}')}); }}",
            ]
        elif kind in OBJECT_TYPES and symbol.startswith("_ZTI"):
            # a class no object here has: its name, no bases (what dynamic_cast and pybind11
            # read; neither finds an object of it)
            lines.append(
                f'const void *const o{i}[2] __asm__("{symbol}") = '
                f"{{ class_type_info + 16, {c_string(symbol[4:])} }};"
            )
        elif kind in OBJECT_TYPES and symbol.startswith("_ZTV") and size >= 16:
            slots = ", ".join(["(const void *)missing_virtual"] * (size // 8 - 2))
            lines.append(f'const void *const o{i}[{size // 8}] __asm__("{symbol}") = '
                         f"{{ 0, 0, {slots} }};")  # fmt: skip
        else:
            raise BuildError(
                f"no stand-in for {symbol} (nm type {kind}, {size} bytes) of {soname}: "
                "imagebuild.cudastub writes functions, typeinfos and vtables only"
            )
    return "\n".join(lines) + "\n"


def version_script(symbols: dict[str, str]) -> str | None:
    """The stub's symbol versions, as the kept files ask for them (None: unversioned)."""
    versions = sorted({v for v in symbols.values() if v})
    if not versions:
        return None
    nodes = []
    for i, version in enumerate(versions):
        names = [s for s, v in sorted(symbols.items()) if v == version or (i == 0 and not v)]
        local = " local: *;" if i == 0 else ""
        nodes.append(f"{version} {{ global: {' '.join(f'{n};' for n in names)}{local} }};")
    return "\n".join(nodes) + "\n"


def stub_dropped(site: Path, dropped: list[Path], work: Path, hint: str) -> dict[str, Wanted]:
    """Delete ``dropped`` (files under ``site``) and put a stub (see the module) in place of
    each of them that a kept ELF file needs. Returns what was stubbed."""
    wanted = wanted_from(site, dropped)
    exports = {name: dynamic_symbols(w.path, defined=True) for name, w in wanted.items()}
    for path in dropped:
        path.unlink()  # a hard link into the DGL venv: unlinked, never written
    c10 = sorted(site.glob(f"torch/lib/{C10}"))
    if wanted and not c10:
        raise BuildError(f"no torch/lib/{C10} under {site}: the CUDA stubs throw c10::Error")
    gcc = find_tool("gcc")
    for soname, w in sorted(wanted.items()):
        source = work / f"{soname}.c"
        source.write_text(stub_source(soname, w.symbols, exports[soname], hint))
        libdir = os.path.relpath(c10[0].parent, w.path.parent)
        args = [gcc, *STUB_CFLAGS, f"-Wl,-soname,{soname}", "-o", str(w.path), str(source)]
        args += [f"-L{c10[0].parent}", f"-l:{C10}", "-l:libstdc++.so.6"]
        args.append("-Wl,-rpath,$ORIGIN" + ("" if libdir == "." else f"/{libdir}"))
        script = version_script(w.symbols)
        if script is not None:
            (work / f"{soname}.map").write_text(script)
            args.append(f"-Wl,--version-script={work / f'{soname}.map'}")
        run(args)
    return wanted


def main(argv: list[str]) -> int:
    """``PYTHONPATH=hack python -m imagebuild.cudastub SITE HINT LIBRARY...``: leave out the
    libraries (paths under SITE) and stub those kept files need; prints what was stubbed as
    JSON (soname: users and symbol versions). The build calls :func:`stub_dropped` itself."""
    import json
    import tempfile

    site, hint, *libraries = argv
    with tempfile.TemporaryDirectory(prefix="cudastub-") as work:
        try:
            wanted = stub_dropped(Path(site), [Path(p) for p in libraries], Path(work), hint)
        except BuildError as e:
            print(f"cudastub: {e}", file=sys.stderr)
            return 1
    doc = {n: {"users": sorted(w.users), "symbols": w.symbols} for n, w in wanted.items()}
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
