#!/usr/bin/env bash
# Build the NetworkPolicy engine of the local cluster, sigs.k8s.io/kube-network-policies
# (SIG Network's reference implementation, the one kind's kindnet embeds), from the Go module
# proxy, the way hack/kueue.sh builds Kueue. Prints the output folder, which holds
#   kube-network-policies   the engine
# Cached in ~/.cache/dgl-operator/kube-network-policies/<version>/; nothing is committed.
#
# v0.8.0 does not run on this project's machines as released, for three reasons; the module's
# source is copied and changed in three places (hack/network_policies_patch.py, which refuses
# to build if upstream's text is not the one it expects), then built:
#   1. It queues packets to userspace with nftables' native `queue` statement (nft_queue);
#      the kernel here is built without it (`# CONFIG_NFT_QUEUE is not set`) but with
#      xt_NFQUEUE and nft_compat. The same verdict (queue NUM, bypass if --fail-open) is put
#      in the rule as the xtables NFQUEUE target (rev 3) through nft_compat.
#   2. It only enforces policy for the pods of one node (--hostname-override). All the local
#      cluster's nodes share this machine's network stack (localcluster/node.py), so one
#      engine enforces for all: `--hostname-override='*'` means every node.
#   3. It reads only the in-cluster configuration (a --kubeconfig flag came in v0.9.0); it
#      runs here beside the API server, so $KUBECONFIG is read when set.
set -euo pipefail

KNP_VERSION=${KNP_VERSION:-v0.8.0}
CACHE=${DGL_OPERATOR_CACHE:-$HOME/.cache/dgl-operator}
OUT=$CACHE/kube-network-policies/$KNP_VERSION
module=sigs.k8s.io/kube-network-policies
here=$(cd "$(dirname "$0")" && pwd)
stamp=$(sha256sum "$here/network_policies_patch.py" | cut -c1-12)

if [ -x "$OUT/kube-network-policies" ] && [ "$(cat "$OUT/.patch" 2>/dev/null)" = "$stamp" ]; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { echo "kube-network-policies: Go is required (https://go.dev)" >&2; exit 2; }
proxy=$(go env GOPROXY | tr '|' ',' | tr ',' '\n' | grep -v -x direct | paste -sd, -)
export GOPROXY=${proxy:-https://proxy.golang.org}
mkdir -p "$OUT"

dir=$(go mod download -json "$module@$KNP_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
src=$OUT/src
rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
python3 "$here/network_policies_patch.py" "$src"

echo "kube-network-policies: building $module $KNP_VERSION (cold builds take minutes)" >&2
start=$(date +%s)
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" \
  -o "$OUT/kube-network-policies.tmp" ./cmd)
mv "$OUT/kube-network-policies.tmp" "$OUT/kube-network-policies"
echo "$stamp" > "$OUT/.patch"
rm -rf "$src"
echo "kube-network-policies: built in $(( $(date +%s) - start ))s" >&2
echo "$OUT"
