"""A part's rows are freed once it is written (distpart.write): DGL 2.1's import keeps the
frames it was imported from alive for good, locals included, so a writer that imported DGL
while holding a part kept that part for the rest of the rank (an elastic job's second count ran
out of memory at products scale). Run with the DGL interpreter, a fresh one per case: what
matters is which frame imports DGL first."""

from __future__ import annotations

import json
from pathlib import Path

from tests.examples.helpers import Dgl, clean_env
from tests.support.paths import REPO

# Write one part from a function, then report whether its rows outlived the call.
SCRIPT = """
import gc, json, sys, weakref
from pathlib import Path
import numpy as np
from distpart.write import PartRows, import_dgl, write_part

class Graph:
    ntype, etype = "_N", "_E"

def write(out):
    n, m = 1000, 5000
    rng = np.random.default_rng(0)
    rows = PartRows(
        part=0, node_range=(0, n), edge_range=(0, m), orig_nids=np.arange(n),
        node_feats={"feat": rng.random((n, 8), dtype=np.float32)},
        src=rng.integers(0, n, m), dst=rng.integers(0, n, m),
        eids=np.arange(m), orig_eids=np.arange(m), edge_feats={},
    )
    kept = weakref.ref(rows.src)
    write_part(out, Graph(), np.array([0, n]), rows)
    return kept

if sys.argv[1] == "first":
    import_dgl()
kept = write(Path(sys.argv[2]))
gc.collect()
print(json.dumps({"alive": kept() is not None, "dgl": "dgl" in sys.modules}))
"""


def run(dgl: Dgl, tmp: Path, case: str) -> dict[str, bool]:
    proc = dgl.run(["-c", SCRIPT, case, tmp], env=clean_env(PYTHONPATH=str(REPO)))
    result: dict[str, bool] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_rows_are_freed_once_written_when_dgl_was_imported_first(dgl: Dgl, tmp_path: Path) -> None:
    assert run(dgl, tmp_path, "first") == {"alive": False, "dgl": True}


def test_control_dgl_imported_by_the_writer_keeps_its_rows(dgl: Dgl, tmp_path: Path) -> None:
    """Why the pipeline imports DGL before it writes: left to write_part's own import, the
    rows it was given stay alive after it returned (if DGL ever stops keeping its import's
    frames, this fails and import_dgl may go)."""
    assert run(dgl, tmp_path, "lazy") == {"alive": True, "dgl": True}
