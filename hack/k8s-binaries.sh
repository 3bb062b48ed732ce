#!/usr/bin/env bash
# Build Kubernetes binaries from the k8s.io/kubernetes Go module (no release downloads exist
# here: only the Go module proxy). Usage: hack/k8s-binaries.sh [component ...]
# (default: kube-apiserver kube-controller-manager). Prints the binaries' folder.
#
# k8s.io/kubernetes's go.mod requires its ~30 staging modules at v0.0.0 with local replaces;
# a private go.mod requires k8s.io/kubernetes and replaces each of those (the list is derived
# from k8s.io/kubernetes's own go.mod) with the published k8s.io/<module> v0.<minor>.<patch>.
# Binaries are cached in ~/.cache/dgl-operator/k8s/<version>/ and reused; nothing is committed.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
CACHE=${DGL_OPERATOR_CACHE:-$HOME/.cache/dgl-operator}
OUT=$CACHE/k8s/$K8S_VERSION
WORK=$CACHE/k8s/build-$K8S_VERSION
COMPONENTS=("$@")
[ ${#COMPONENTS[@]} -gt 0 ] || COMPONENTS=(kube-apiserver kube-controller-manager)

missing=()
for c in "${COMPONENTS[@]}"; do
  [ -x "$OUT/$c" ] || missing+=("$c")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { echo "k8s-binaries: Go is required (https://go.dev)" >&2; exit 2; }
# Modules come from the module proxy only: never 'direct' from their source hosts ('off', for
# a filled module cache, stays off).
proxy=$(go env GOPROXY | tr '|' ',' | tr ',' '\n' | grep -v -x direct | paste -sd, -)
export GOPROXY=${proxy:-https://proxy.golang.org}
export GOFLAGS="$(go env GOFLAGS) -mod=mod"
mkdir -p "$OUT" "$WORK"
cd "$WORK"
staging="v0.${K8S_VERSION#v1.}"

if [ ! -f go.mod ]; then
  upstream_mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  go_line=$(grep -m1 -E '^go [0-9]' "$upstream_mod")
  {
    echo "module dgl-operator.local/k8s-build"
    echo
    echo "$go_line"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/src/k8s\.io/' "$upstream_mod" |
      awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > go.mod.tmp
  mv go.mod.tmp go.mod
  echo "k8s-binaries: $(grep -c ' => ' go.mod) staging modules replaced with $staging" >&2
fi

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$stamp"
done

for c in "${missing[@]}"; do
  echo "k8s-binaries: building $c $K8S_VERSION (cold builds take minutes)" >&2
  start=$(date +%s)
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
    -o "$OUT/$c.tmp" "k8s.io/kubernetes/cmd/$c"
  mv "$OUT/$c.tmp" "$OUT/$c"
  echo "k8s-binaries: $c built in $(( $(date +%s) - start ))s" >&2
done
echo "$OUT"
