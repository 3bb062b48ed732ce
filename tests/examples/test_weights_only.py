"""Nothing read from a claim runs code (issue 42): a checkpoint or a model.pt that carries a
pickle payload (an object whose unpickling calls os.system, as anybody who can write the claim
could plant) is refused by the example's trainer and by evaluate.py, with one line naming the
file, and the payload never runs. The same file loaded the old way (``weights_only=False``)
does run it: the attack is real."""

from __future__ import annotations

import json
from pathlib import Path

from tests.examples.helpers import EXAMPLE, Dgl, clean_env

# Written with the DGL interpreter: a checkpoint whose "model" unpickles as os.system(touch)
PLANT = """
import os, sys, torch

class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[2],))

torch.save({"epochs_done": 1, "model": Payload(), "losses": [1.0]}, sys.argv[1])
"""


def plant(dgl: Dgl, tmp_path: Path, path: Path, marker: Path) -> None:
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    dgl.run([script, path, marker])
    assert path.is_file() and not marker.exists()


def test_the_payload_runs_when_loaded_the_old_way(dgl: Dgl, tmp_path: Path) -> None:
    checkpoint, marker = tmp_path / "epoch-1.pt", tmp_path / "ran"
    plant(dgl, tmp_path, checkpoint, marker)
    old = "import sys, torch; torch.load(sys.argv[1], weights_only=False)"
    dgl.run(["-c", old, checkpoint])
    assert marker.exists(), "the planted payload should run under weights_only=False"


def test_a_planted_checkpoint_stops_the_trainer_and_runs_nothing(dgl: Dgl, tmp_path: Path) -> None:
    checkpoint, marker = tmp_path / "epoch-1.pt", tmp_path / "ran"
    plant(dgl, tmp_path, checkpoint, marker)
    load = (
        "import sys; sys.path.insert(0, sys.argv[2]); import train_dist; "
        "train_dist._load_checkpoint(sys.argv[1], '[rank 0]')"
    )
    out = dgl.run(["-c", load, checkpoint, EXAMPLE], check=False, env=clean_env())
    assert out.returncode == 2, out.stdout + out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f"train_dist.py: error: [rank 0] checkpoint {checkpoint} is refused: "
    ), line
    assert "it holds more than tensors and plain values, and loading it could run code" in line
    assert "Traceback" not in out.stderr
    assert not marker.exists(), "the payload ran"


def test_a_planted_model_is_refused_by_evaluate(dgl: Dgl, tmp_path: Path) -> None:
    results, marker = tmp_path / "output", tmp_path / "ran"
    results.mkdir()
    (results / "metrics.json").write_text(json.dumps({"num_hidden": 8}))
    plant(dgl, tmp_path, results / "model.pt", marker)
    out = dgl.run(
        [EXAMPLE / "evaluate.py", "--results", results, "--dataset", "ogbn-synth"],
        check=False,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith(f"evaluate.py: error: {results / 'model.pt'} is refused: "), line
    assert "Traceback" not in out.stderr
    assert not marker.exists(), "the payload ran"
