"""A user's training folder cannot shadow the programs the pods and dglrun start.

Pods run with the training image's working directory: the user's folder. ``python -m X``
puts the working directory first on sys.path, so a ``launcher.py`` or a ``controller/`` of the
user's would be imported instead of ours. dglrun therefore starts every ``python -m`` program
in safe-path mode (launcher/programs.py: ``python -P -m``), and the images start the console
scripts (dglrun, dgl-operator, watcher-loop, kubectl-download) from /usr/local/bin, whose
sys.path[0] is the script's folder, not the working directory. Here a training folder holding a
module of every name we install is the working directory of each program, started the way the
pods start it: the program's output is the same as from an empty folder, and none of the
user's modules ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher import programs
from tests.support.paths import REPO

# every top-level package this distribution installs (setup.cfg), as a user's module or package
INSTALLED = (
    "launcher",
    "controller",
    "watcher_loop",
    "kubectl_download",
    "distpart",
    "chunkedgraph",
    "podprogram",
    "podcontract",
    "clock",
    "workqueue",
    "kubeclient",
    "informers",
    "outofcore",
    "dglprocess",
    "dgljob",
    "dgl_operator",
)
MARKER = "shadowed.txt"
SHADOW = (
    "import pathlib, sys\n"
    f"pathlib.Path({MARKER!r}).write_text(__name__)\n"
    "sys.exit('the user module ' + __name__ + ' was imported')\n"
)
# the console scripts of setup.cfg, as pip writes them into the images' /usr/local/bin
CONSOLE_SCRIPTS = {
    "dglrun": "launcher.cli",
    "dgl-operator": "controller.main",
    "watcher-loop": "watcher_loop.__main__",
    "kubectl-download": "kubectl_download.__main__",
}


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """(a user's training folder with a module of each of our names, an empty folder)."""
    user, empty = tmp_path / "training", tmp_path / "empty"
    empty.mkdir()
    user.mkdir()
    for i, name in enumerate(INSTALLED):
        if i % 2:  # both kinds: a module and a package
            (user / name).mkdir()
            (user / name / "__init__.py").write_text(SHADOW)
            (user / name / "__main__.py").write_text(SHADOW)
        else:
            (user / f"{name}.py").write_text(SHADOW)
    return user, empty


def run(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    # as in the images: our packages on PYTHONPATH, the working directory the user's
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(cwd)}
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout.replace(str(cwd), "<cwd>"), proc.stderr


def same_as_from_an_empty_folder(argv: list[str], user: Path, empty: Path) -> tuple[int, str]:
    got = run(argv, user)
    assert not (user / MARKER).exists(), (
        f"{argv}: imported the user's {(user / MARKER).read_text()}"
    )
    assert got == run(argv, empty), argv
    return got[0], got[1]


@pytest.mark.parametrize("program", programs.PROGRAMS)
def test_dglrun_s_programs_are_ours_in_a_users_folder(
    program: str, folders: tuple[Path, Path]
) -> None:
    """Every ``python -m`` program dglrun starts (on its pod, the partitioner, the workers)."""
    user, empty = folders
    code, out = same_as_from_an_empty_folder(
        programs.argv(sys.executable, program, "--help"), user, empty
    )
    assert code == 0 and "usage:" in out, out


def test_the_workers_shell_command_line_is_ours_in_a_users_folder(
    folders: tuple[Path, Path],
) -> None:
    """The one program started through a shell command line (kubexec.sh's ``sh -c``):
    ``remote manifest`` of a folder, read back as JSON."""
    user, empty = folders
    parts = empty.parent / "parts"
    parts.mkdir()
    (parts / "a.bin").write_bytes(b"x" * 10)
    line = programs.command_line(sys.executable, programs.REMOTE, "manifest", str(parts))
    code, out = same_as_from_an_empty_folder(["sh", "-c", line], user, empty)
    assert code == 0 and json.loads(out)["a.bin"][0] == 10, out


@pytest.mark.parametrize("script", sorted(CONSOLE_SCRIPTS))
def test_the_images_console_scripts_are_ours_in_a_users_folder(
    script: str, folders: tuple[Path, Path], tmp_path: Path
) -> None:
    """The pods' entry points: dglrun (partitioner and launcher), dgl-operator, watcher-loop
    and kubectl-download, written the way pip writes console scripts."""
    user, empty = folders
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = bin_dir / script
    path.write_text(
        f"import sys\nfrom {CONSOLE_SCRIPTS[script]} import main\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n"
    )
    # dgl-operator and dglrun have --help; watcher-loop and kubectl-download read only their
    # environment and stop on what is missing: either way the same output from both folders
    same_as_from_an_empty_folder([sys.executable, str(path), "--help"], user, empty)


def test_without_safe_path_the_users_module_would_win(folders: tuple[Path, Path]) -> None:
    """The check above can fail: plain ``python -m`` imports the user's ``launcher.py``."""
    user, _ = folders
    code, _, err = run([sys.executable, "-m", programs.REMOTE, "--help"], user)
    assert code != 0 and (user / MARKER).read_text() == "launcher", err
