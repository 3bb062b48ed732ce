"""The three changes hack/network-policies.sh makes to kube-network-policies v0.8.0 before
building it (that script's header says why each is needed here). Each replaces one exact
text of upstream's source, a given number of times; if the text is not found as often, the
build stops naming the file, so a new upstream version is read again before it is changed.

    python3 hack/network_policies_patch.py SRC_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

# (file, upstream text, replacement, times)
CHANGES: tuple[tuple[str, str, str, int], ...] = (
    # 1. queue to userspace through nft_compat's xtables NFQUEUE target, not nft_queue
    (
        "pkg/networkpolicy/controller.go",
        "\tqueue := &expr.Queue{Num: uint16(c.config.QueueID)}\n"
        "\tif c.config.FailOpen {\n"
        "\t\tqueue.Flag = expr.QueueFlagBypass\n"
        "\t}\n",
        "\tqueue := nfqueueTarget(c.config.QueueID, c.config.FailOpen)\n",
        2,
    ),
    # 2. a node name of "*": the pods of every node are this engine's
    (
        "pkg/networkpolicy/controller.go",
        "pod.Spec.NodeName != c.config.NodeName",
        "!c.config.local(pod.Spec.NodeName)",
        3,
    ),
    (
        "pkg/networkpolicy/networkpolicy.go",
        "pod.Spec.NodeName == c.config.NodeName",
        "c.config.local(pod.Spec.NodeName)",
        1,
    ),
    # 3. $KUBECONFIG when set, else the in-cluster configuration
    (
        "cmd/main.go",
        "\tconfig, err := rest.InClusterConfig()\n",
        '\tconfig, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))\n',
        1,
    ),
    (
        "cmd/main.go",
        '\t"k8s.io/client-go/rest"\n',
        '\t"k8s.io/client-go/tools/clientcmd"\n',
        1,
    ),
)

ADDED = """package networkpolicy

// Added by dgl-operator's hack/network_policies_patch.py.

import (
\t"encoding/binary"

\t"github.com/google/nftables/expr"
\t"github.com/google/nftables/xt"
)

// nfqueueTarget is `-j NFQUEUE --queue-num id [--queue-bypass]` (xt_NFQUEUE revision 3:
// queuenum, queues_total, flags; padded to 8 bytes as xtables aligns it), for kernels built
// without nft_queue.
func nfqueueTarget(id int, failOpen bool) *expr.Target {
\tinfo := make(xt.Unknown, 8)
\tbinary.NativeEndian.PutUint16(info[0:], uint16(id))
\tbinary.NativeEndian.PutUint16(info[2:], 1)
\tif failOpen {
\t\tbinary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
\t}
\treturn &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}

// local says whether a pod on node is this engine's to enforce: every node's when the
// node name is "*".
func (c Config) local(node string) bool {
\treturn c.NodeName == "*" || node == c.NodeName
}
"""


def main(src: Path) -> int:
    for rel, old, new, times in CHANGES:
        path = src / rel
        text = path.read_text()
        found = text.count(old)
        if found != times:
            print(
                f"{path}: expected {times} of {old.strip()!r}, found {found}: "
                "upstream changed; read it again before building",
                file=sys.stderr,
            )
            return 1
        path.write_text(text.replace(old, new))
    (src / "pkg/networkpolicy/dgl_operator_patch.go").write_text(ADDED)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
