# %% [markdown]
# # GraphSAGE on Kubernetes, from Python
#
# The example DGLJob with its results on a claim (`dgljob-storage.yaml`), submitted, followed,
# waited for and collected with `dgl_operator.client`, then its model scored here, on this
# machine. Each `# %%` is a notebook cell (VS Code and Jupytext open it as a notebook); as a
# script it runs top to bottom:
#
#     python examples/graphsage/notebook.py
#
# Settings come from the environment: `DGLJOB_NAMESPACE` (default `dgl-operator`, the
# manifest's), `DGLJOB_NAME`, `DGLJOB_EPOCHS`, `DGLJOB_BATCH_SIZE`, `RESULTS_DIR` (default
# `./results-<job>`), `DGL_PYTHON` (a Python with dgl, torch and ogb for the last cell: the
# evaluation; default this one). The cluster is the kubeconfig's (`$KUBECONFIG`,
# `~/.kube/config`), or the pod's when run in one.

# %%
import json
import os
import subprocess
import sys
from pathlib import Path

from dgl_operator.client import DGLJobClient, JobFailed, manifest

# this folder: the script's own, or a notebook kernel's working folder (Jupyter starts it there)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
job = manifest(HERE / "dgljob-storage.yaml")  # the YAML as a dict: change what you like
args = job["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
for flag, env in (("--num-epochs", "DGLJOB_EPOCHS"), ("--batch-size", "DGLJOB_BATCH_SIZE")):
    if os.environ.get(env):
        args[args.index(flag) + 1] = os.environ[env]
job["metadata"]["name"] = os.environ.get("DGLJOB_NAME", job["metadata"]["name"])
job["metadata"]["namespace"] = os.environ.get("DGLJOB_NAMESPACE", job["metadata"]["namespace"])
name = job["metadata"]["name"]
results_dir = Path(os.environ.get("RESULTS_DIR", f"results-{name}"))

jobs = DGLJobClient(namespace=job["metadata"]["namespace"])
jobs.create(job, dry_run=True)  # the API server checks it first, and stores nothing
created = jobs.create(job)
print(f"submitted dgljob {name} in namespace {jobs.namespace} (uid {created['metadata']['uid']})")

# %% [markdown]
# Follow the launcher's log until the job ends: dglrun's `[k/5]` steps, the trainers' epochs,
# its summary. A restart (a worker lost) replaces the launcher pod; the log carries on there.

# %%
steps = tuple(f"[{k}/5]" for k in range(1, 6))  # dglrun's steps (the workers' lines: [pod/...])
for line in jobs.logs(name, follow=True):
    if line.startswith((*steps, "dglrun:", "---")) or "[rank 0] epoch" in line:
        print(line)

# %%
try:
    done = jobs.wait(name, timeout=1800)
except JobFailed as e:
    print(f"the job failed: {e.reason}: {e.message}")
    raise
status = done["status"]
print(f"{name}: {status['phase']}, restarts {status.get('restartCount', 0)}, "
      f"results at {status['results']}")  # fmt: skip
for event in jobs.events(name):
    print(f"  event {event['reason']}: {event['message']}")

# %% [markdown]
# Copy the results from the claim: `model.pt`, `metrics.json`, `dglrun.json` and the logs.

# %%
copied = jobs.results(name, results_dir)
print(copied)
metrics = json.loads((results_dir / "metrics.json").read_text())
print(f"the job reported test accuracy {metrics['test_accuracy']:.4f}, {metrics['epochs']} epochs")

# %% [markdown]
# Score the model here, on the same synthetic graph the image holds (`make_dataset.py`, seed
# 0: written in a few seconds), with the example's `evaluate.py`. This needs dgl, torch and ogb.

# %%
python = os.environ.get("DGL_PYTHON", sys.executable)
data = results_dir.parent / "raw_data"
if not (data / "ogbn_synth").exists():
    subprocess.run([python, str(HERE / "make_dataset.py"), "--root", str(data)], check=True,
                   capture_output=True)  # fmt: skip
scored = subprocess.run(
    [python, str(HERE / "evaluate.py"), "--results", str(results_dir), "--dataset_root", str(data)],
    capture_output=True, text=True,
)  # fmt: skip
if scored.returncode != 0:  # (e.g. a model.pt that could run code: its one line names the file)
    raise SystemExit((scored.stderr.strip().splitlines() or ["evaluate.py failed"])[-1])
evaluated = json.loads(scored.stdout.strip().splitlines()[-1])
print(f"model.pt scores {evaluated['accuracy']:.4f} on {evaluated['nodes']} test nodes here "
      f"(the job reported {metrics['test_accuracy']:.4f})")  # fmt: skip
