#!/usr/bin/env bash
# Build the scheduler of sigs.k8s.io/scheduler-plugins (kube-scheduler plus the Coscheduling
# plugin and its PodGroup API) from the Go module proxy, the way hack/k8s-binaries.sh builds
# Kubernetes. Prints the output folder, which holds:
#   scheduler                                   the binary
#   scheduling.x-k8s.io_podgroups.yaml          the PodGroup CRD of the same version
# The module's own replace directives (its k8s.io staging modules) are copied into a private
# go.mod (`go install module@version` refuses modules with replaces), each k8s.io module at
# the version of K8S_VERSION. Cached in
# ~/.cache/dgl-operator/scheduler-plugins/<version>/; nothing is committed.
set -euo pipefail

SP_VERSION=${SCHEDULER_PLUGINS_VERSION:-v0.34.7}
# Its Kubernetes libraries are pinned to the cluster's own version (hack/k8s-binaries.sh): the
# proxy lacks some staging modules of the version it names (k8s.io/csi-translation-lib v0.34.7).
K8S_VERSION=${K8S_VERSION:-v1.34.4}
CACHE=${DGL_OPERATOR_CACHE:-$HOME/.cache/dgl-operator}
OUT=$CACHE/scheduler-plugins/$SP_VERSION
WORK=$CACHE/scheduler-plugins/build-$SP_VERSION-$K8S_VERSION
CRD=scheduling.x-k8s.io_podgroups.yaml

if [ -x "$OUT/scheduler" ] && [ -f "$OUT/$CRD" ]; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { echo "scheduler-plugins: Go is required (https://go.dev)" >&2; exit 2; }
proxy=$(go env GOPROXY | tr '|' ',' | tr ',' '\n' | grep -v -x direct | paste -sd, -)
export GOPROXY=${proxy:-https://proxy.golang.org}
export GOFLAGS="$(go env GOFLAGS) -mod=mod"
mkdir -p "$OUT" "$WORK"
cd "$WORK"
module=sigs.k8s.io/scheduler-plugins
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}

if [ ! -f go.mod ]; then
  json=$(go mod download -json "$module@$SP_VERSION")
  upstream_mod=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["GoMod"])' "$json")
  go_line=$(grep -m1 -E '^go [0-9]' "$upstream_mod")
  {
    echo "module dgl-operator.local/scheduler-plugins-build"
    echo
    echo "$go_line"
    echo
    echo "require $module $SP_VERSION"
    echo
    # the upstream replaces, k8s.io ones moved to K8S_VERSION (v1.x.y; staging v0.x.y)
    awk '/^replace \(/{on=1; print; next} on&&/^\)/{print; on=0; next} on{print} /^replace [^(]/{print}' "$upstream_mod" |
      sed -E "s#(k8s\.io/kubernetes => k8s\.io/kubernetes) v1\.[0-9.]+#\1 $K8S_VERSION#; s#(k8s\.io/[a-z-]+ => k8s\.io/[a-z-]+) v0\.${minor}\.[0-9]+#\1 v0.${K8S_VERSION#v1.}#"
  } > go.mod.tmp
  mv go.mod.tmp go.mod
  echo "scheduler-plugins: $(grep -c ' => ' go.mod) replaces taken from $module's go.mod" >&2
fi

dir=$(go mod download -json "$module@$SP_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
src=$dir/manifests/coscheduling/crd.yaml
[ -f "$src" ] || { echo "scheduler-plugins: $src not found" >&2; exit 1; }
cp "$src" "$OUT/$CRD.tmp" && mv "$OUT/$CRD.tmp" "$OUT/$CRD"

if [ ! -x "$OUT/scheduler" ]; then
  echo "scheduler-plugins: building $module/cmd/scheduler $SP_VERSION (cold builds take minutes)" >&2
  start=$(date +%s)
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/scheduler.tmp" "$module/cmd/scheduler"
  mv "$OUT/scheduler.tmp" "$OUT/scheduler"
  echo "scheduler-plugins: scheduler built in $(( $(date +%s) - start ))s" >&2
fi
echo "$OUT"
