"""Nothing read from a claim runs code (issue 42): a checkpoint or a model.pt that carries a
pickle payload (an object whose unpickling calls os.system, as anybody who can write the claim
could plant) is refused by the example's trainer and by evaluate.py, with one line naming the
file and podcontract's REFUSED_EXIT_CODE, and the payload never runs. The same file loaded the
old way (``weights_only=False``) does run it: the attack is real.

Issue 57: the refusal fails the job at once. dglrun, resuming from every kept checkpoint so
planted (their digests rewritten too), ends with the trainer's refusal as its termination
message (``refused: ...``, the file named), which the operator reads as FileRefused, a
failure no restart retries; a well-formed checkpoint in its place is resumed from."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from controller.status.conditions import REASON_FILE_REFUSED
from controller.status.failures import PodFailure
from launcher.checksums import file_sha256
from podcontract import PHASE_LAUNCHER_WORKLOAD, REFUSED_EXIT_CODE
from podcontract.settings import PHASE
from tests.examples.helpers import EXAMPLE, Dgl, clean_env
from tests.support.paths import REPO

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
    assert out.returncode == REFUSED_EXIT_CODE, out.stdout + out.stderr
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
    assert out.returncode == REFUSED_EXIT_CODE, out.stdout + out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith(f"evaluate.py: error: {results / 'model.pt'} is refused: "), line
    assert "Traceback" not in out.stderr
    assert not marker.exists(), "the payload ran"


def test_the_examples_refusal_code_is_dglruns() -> None:
    """common.py spells the contract's code itself (the example runs where dglrun may not)."""
    tree = ast.parse((EXAMPLE / "common.py").read_text())
    (value,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["REFUSED_EXIT_CODE"]
    ]
    assert value == REFUSED_EXIT_CODE


# The training entry point of a Skip-mode dglrun: the example trainer's own checkpoint loading
# (train_dist._load_checkpoint) of what dglrun hands every trainer, $DGLRUN_RESUME_FROM
RESUME = """
import os, sys
sys.path.insert(0, sys.argv[-1])  # (--train-args: the example folder, last)
import train_dist
state = train_dist._load_checkpoint(os.environ["DGLRUN_RESUME_FROM"], "[rank 0]")
print("trainer carries on at epoch", os.environ["DGLRUN_RESUME_EPOCH"], flush=True)
"""

# A well-formed checkpoint, as train_dist.py saves one
WELL_FORMED = """
import sys, torch
torch.save({"epochs_done": 2, "model": {"w": torch.zeros(2)}, "optimizer": {}, "losses": [1.0],
            "epoch_seconds": [0.1]}, sys.argv[1])
"""


def resume(dgl: Dgl, tmp_path: Path, storage: Path) -> subprocess.CompletedProcess[str]:
    """dglrun in Skip mode (the launcher pod's workload alone) on ``storage``: it chooses the
    checkpoint, and the example trainer's loading reads it."""
    script = tmp_path / "resume.py"
    script.write_text(RESUME)
    args = ["-g", "g", "--train-entry-point", str(script), "--train-args", str(EXAMPLE),
            "--python", dgl.python, "--workspace", str(tmp_path / "ws"), "--num-epochs", "4",
            "--storage", str(storage), "--run-name", "r"]  # fmt: skip
    env = {**clean_env(), "PYTHONPATH": str(REPO), PHASE.env: PHASE_LAUNCHER_WORKLOAD}
    return subprocess.run(
        [sys.executable, "-m", "launcher.cli", *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )  # fmt: skip


def test_dglrun_ends_quoting_the_trainers_refusal_and_the_job_fails_for_good(
    dgl: Dgl, tmp_path: Path
) -> None:
    storage, marker = tmp_path / "storage", tmp_path / "ran"
    folder = storage / "runs" / "r" / "checkpoints"
    folder.mkdir(parents=True)
    for n in (1, 2):  # every kept checkpoint, and its digest: a writer of the claim did both
        planted = folder / f"epoch-{n}.pt"
        plant(dgl, tmp_path, planted, marker)
        (folder / f"epoch-{n}.pt.sha256").write_text(file_sha256(planted) + "\n")
    out = resume(dgl, tmp_path, storage)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert not marker.exists(), "the payload ran"
    newest = folder / "epoch-2.pt"
    last = out.stdout.strip().splitlines()[-1]
    why = last.removeprefix("dglrun: error: ")  # (also the pod's termination message)
    assert why.startswith(
        f"refused: train_dist.py: error: [rank 0] checkpoint {newest} is refused: it holds "
        "more than tensors and plain values, and loading it could run code ("
    ), last
    assert why.endswith(
        f"(the training entry point {tmp_path / 'resume.py'} exited with code 65: it refused "
        "a file it was to load, and would refuse it again on a restart)"
    ), last
    assert "posix.system" in why and "weights_only` set to `False`" not in why, why
    failure = PodFailure("Launcher", "j-launcher", "dgl", 1, "Error", why)
    assert failure.condition_reason == REASON_FILE_REFUSED and failure.permanent
    assert failure.describe().startswith(f"train_dist.py: error: [rank 0] checkpoint {newest}")

    # the twin: the same newest checkpoint well-formed is resumed from (and nothing refused)
    well_formed = tmp_path / "well_formed.py"
    well_formed.write_text(WELL_FORMED)
    dgl.run([well_formed, newest])
    (folder / "epoch-2.pt.sha256").write_text(file_sha256(newest) + "\n")
    out = resume(dgl, tmp_path, storage)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"[rank 0] resumed from {newest}: 2 epoch(s) were done" in out.stdout
    assert "trainer carries on at epoch 2" in out.stdout
    assert not marker.exists()
