"""python -m dglprocess run with DGL 2.1: a server's rpc_server gets the short wait (and a
server under DGL_OPERATOR_FAST_START=0, or any process that is not a DGL server, keeps DGL's
own), the script runs as ``python SCRIPT ARGS`` would, and a bad command line is one line.
Every dglrun test that trains runs its servers and trainers under it (launcher train_argv);
what it saves is measured by bench/pipeline_bench.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.examples.helpers import Dgl, clean_env
from tests.support.paths import REPO

PROBE = """
import json, sys
from dgl.distributed import rpc_server, rpc_client, connect_to_server
import dgl.distributed.dist_context as dist_context
print(json.dumps({"clock": type(rpc_server.time).__name__, "argv": sys.argv,
                  "name": __name__, "path0": sys.path[0],
                  "connect": [hasattr(f, "__wrapped__") for f in (
                      rpc_client.connect_to_server, connect_to_server,
                      dist_context.connect_to_server)]}))
"""
# DGL imported before prepare(), as ``python -m outofcore run``'s patch imports it: the same
# changes, made at once
IMPORTED_FIRST = """
import json, sys
import dgl.distributed.dist_context as dist_context
from dglprocess import start
start.prepare()
from dgl.distributed import rpc_server, rpc_client, connect_to_server
print(json.dumps({"clock": type(rpc_server.time).__name__,
                  "connect": [hasattr(f, "__wrapped__") for f in (
                      rpc_client.connect_to_server, connect_to_server,
                      dist_context.connect_to_server)]}))
"""
# a script that never imports DGL (the tests' stand-ins): DGL stays out of its process
NO_DGL = """
import json, sys
print(json.dumps({"dgl": "dgl" in sys.modules, "torch": "torch" in sys.modules}))
"""


def probe(dgl: Dgl, tmp_path: Path, text: str = PROBE, **env: str) -> dict[str, object]:
    script = tmp_path / "probe.py"
    script.write_text(text)
    proc = dgl.run(
        ["-P", "-m", "dglprocess", "run", script, "--graph_name", "g"],
        env=clean_env(PYTHONPATH=str(REPO), **env),
    )
    seen: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return seen


def test_a_server_waits_a_quarter_second_for_the_receivers_and_the_script_runs_as_itself(
    dgl: Dgl, tmp_path: Path
) -> None:
    seen = probe(dgl, tmp_path, DGL_ROLE="server")
    assert seen["clock"] == "_ShortWait" and seen["connect"] == [False] * 3
    assert seen["argv"] == [str(tmp_path / "probe.py"), "--graph_name", "g"]
    assert seen["name"] == "__main__" and seen["path0"] == str(tmp_path)


def test_a_trainer_waits_for_its_servers_in_every_connect_to_server_dgl_has(
    dgl: Dgl, tmp_path: Path
) -> None:
    """Each name DGL calls connect_to_server by is the waiting one (dist_context took it by
    ``from .rpc_client import``), and the server's clock is DGL's."""
    seen = probe(dgl, tmp_path, DGL_ROLE="client")
    assert seen["connect"] == [True] * 3 and seen["clock"] == "module"


def test_a_script_that_does_not_import_dgl_does_not_load_it(dgl: Dgl, tmp_path: Path) -> None:
    """prepare() imports nothing (before, it imported DGL, about 10 s of the tests' stand-in
    processes)."""
    for role in ("server", "client"):
        assert probe(dgl, tmp_path, NO_DGL, DGL_ROLE=role) == {"dgl": False, "torch": False}


def test_without_the_switch_or_as_another_process_dgl_starts_as_its_own(
    dgl: Dgl, tmp_path: Path
) -> None:
    """The twins: the same probe sees DGL's ``time`` module."""
    for env in (
        {"DGL_ROLE": "server", "DGL_OPERATOR_FAST_START": "0"},
        {"DGL_ROLE": "client", "DGL_OPERATOR_FAST_START": "0"},
        {},
    ):  # fmt: skip  (no DGL_ROLE: Skip mode's one process)
        seen = probe(dgl, tmp_path, **env)
        assert (seen["clock"], seen["connect"]) == ("module", [False] * 3), env


def test_a_missing_script_and_a_bad_command_line_are_one_line(dgl: Dgl, tmp_path: Path) -> None:
    env = clean_env(PYTHONPATH=str(REPO))
    missing = dgl.run(["-P", "-m", "dglprocess", "run", tmp_path / "nope.py"], env=env, check=False)
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        f"dglprocess: {tmp_path / 'nope.py'}: no such training script",
    )
    usage = dgl.run(["-P", "-m", "dglprocess"], env=env, check=False)
    assert (
        usage.returncode == 2
        and usage.stderr.strip() == "usage: python -m dglprocess run SCRIPT [ARGS...]"
    )


def test_dgl_imported_before_prepare_is_changed_at_once(dgl: Dgl, tmp_path: Path) -> None:
    """An out-of-core worker's runner imports DGL (its patch) before prepare(): a server's
    clock is changed and a trainer's every connect_to_server waits, as when the script
    imports DGL itself."""
    script = tmp_path / "first.py"
    script.write_text(IMPORTED_FIRST)
    seen = {}
    for role in ("server", "client"):
        proc = dgl.run(["-P", script], env=clean_env(PYTHONPATH=str(REPO), DGL_ROLE=role))
        seen[role] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["server"] == {"clock": "_ShortWait", "connect": [False] * 3}
    assert seen["client"] == {"clock": "module", "connect": [True] * 3}
