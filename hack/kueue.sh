#!/usr/bin/env bash
# Build Kueue's manager (sigs.k8s.io/kueue/cmd/kueue) from the Go module proxy, the way
# hack/scheduler-plugins.sh builds the Coscheduling scheduler. Prints the output folder, which
# holds:
#   kueue         the manager binary
#   crds/*.yaml   the CRDs of the same version (config/components/crd/bases: no conversion
#                 webhook patches, so every client must use v1beta2, the stored version)
# The module has no replace directives, so `go install module@version` builds it as released
# (its k8s.io libraries v0.35: one minor version ahead of the local API server, which client
# skew allows). Cached in ~/.cache/dgl-operator/kueue/<version>/; nothing is committed.
set -euo pipefail

KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}
CACHE=${DGL_OPERATOR_CACHE:-$HOME/.cache/dgl-operator}
OUT=$CACHE/kueue/$KUEUE_VERSION
module=sigs.k8s.io/kueue

if [ -x "$OUT/kueue" ] && [ -f "$OUT/crds/.complete" ]; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { echo "kueue: Go is required (https://go.dev)" >&2; exit 2; }
proxy=$(go env GOPROXY | tr '|' ',' | tr ',' '\n' | grep -v -x direct | paste -sd, -)
export GOPROXY=${proxy:-https://proxy.golang.org}
mkdir -p "$OUT"

dir=$(go mod download -json "$module@$KUEUE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
src=$dir/config/components/crd/bases
[ -d "$src" ] || { echo "kueue: $src not found" >&2; exit 1; }
rm -rf "$OUT/crds.tmp" && mkdir "$OUT/crds.tmp"
cp "$src"/*.yaml "$OUT/crds.tmp/" && chmod u+w "$OUT/crds.tmp"/*.yaml
touch "$OUT/crds.tmp/.complete"
rm -rf "$OUT/crds" && mv "$OUT/crds.tmp" "$OUT/crds"

if [ ! -x "$OUT/kueue" ]; then
  echo "kueue: building $module/cmd/kueue $KUEUE_VERSION (cold builds take minutes)" >&2
  start=$(date +%s)
  rm -rf "$OUT/bin.tmp" && mkdir "$OUT/bin.tmp"
  GOBIN="$OUT/bin.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
    "$module/cmd/kueue@$KUEUE_VERSION"
  mv "$OUT/bin.tmp/kueue" "$OUT/kueue" && rm -rf "$OUT/bin.tmp"
  echo "kueue: manager built in $(( $(date +%s) - start ))s" >&2
fi
echo "$OUT"
