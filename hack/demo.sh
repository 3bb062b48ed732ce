#!/usr/bin/env bash
# make demo-local: the GraphSAGE example through dglrun on this machine, without Kubernetes. Two
# "worker pods" (network + mount namespaces) get one partition each; DGL servers and trainers
# run in them. As root, or as a user allowed unprivileged user namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DGL_PYTHON:?DGL_PYTHON must point at the DGL environment (make demo sets it)}"
: "${OPERATOR_PYTHON:?OPERATOR_PYTHON must point at the project environment}"
CACHE=${DGL_OPERATOR_CACHE:-$HOME/.cache/dgl-operator}
DATA=$CACHE/datasets
export OUTDATED_IGNORE=1 DGLBACKEND=pytorch PYTHONPATH=$PWD
if [ ! -f "$DATA/ogbn_synth/RELEASE_v1.txt" ]; then
  echo "== generating the synthetic ogbn-synth graph (20k nodes, 200k edges) in $DATA"
  "$DGL_PYTHON" examples/graphsage/make_dataset.py --root "$DATA"
fi
WS=$(mktemp -d /tmp/dgl-demo.XXXXXX)
echo "== dglrun: partition into 2, dispatch, train GraphSAGE on 2 workers (workspace $WS)"
"$OPERATOR_PYTHON" -m launcher.cli -g graphsage --num-partitions 2 --balance-train --balance-edges \
  --partition-entry-point examples/graphsage/load_and_partition_graph.py \
  --partition-args "--dataset ogbn-synth --dataset_root $DATA" \
  --train-entry-point examples/graphsage/train_dist.py \
  --num-epochs 2 --batch-size 128 --transport local --workspace "$WS" --python "$DGL_PYTHON"
echo
echo "== results: $WS/output/metrics.json and model.pt"
"$OPERATOR_PYTHON" - "$WS/output/metrics.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"test accuracy {m['test_accuracy']:.4f}, validation accuracy {m['val_accuracy']:.4f}, "
      f"{m['epochs']} epochs on {m['num_parts']} workers in {m['train_seconds']:.1f}s")
PY
echo "clean up with: rm -rf $WS"
