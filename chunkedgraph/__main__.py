"""``python -m chunkedgraph check``: a chunked graph checked where it lives (the partitioner
pod, or each worker through ``kubectl exec``), with a one-line JSON summary (and the memory
plan's row sizes) or one line naming the bad file."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import chunkedgraph
from chunkedgraph import ChunkedError, content_hashes, data_bytes, load, shares, verify
from podcontract import CHUNKED_LAYOUTS, SHARED


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chunkedgraph", description=chunkedgraph.__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="verify the metadata and the chunk files")
    c.add_argument("path", help="the chunked graph's folder or its metadata.json")
    c.add_argument("--ranks", type=int, default=1)
    c.add_argument("--layout", choices=CHUNKED_LAYOUTS, default=SHARED)
    c.add_argument("--rank", type=int, help="check only the files this rank reads")
    c.add_argument(
        "--hash", action="store_true", help="also report the SHA-256 of every file checked"
    )
    a = p.parse_args(argv)
    try:
        graph = load(a.path)
        share = None
        if a.rank is not None:
            all_shares = shares(graph, a.ranks, a.layout)
            if not 0 <= a.rank < a.ranks:
                raise ChunkedError(f"--rank {a.rank} is not in 0..{a.ranks - 1}")
            share = all_shares[a.rank]
        elif a.ranks > 1 or a.layout != SHARED:
            shares(graph, a.ranks, a.layout)  # the layout fits the ranks
        files = verify(graph, share)
        hashes = content_hashes(graph, share) if a.hash else None
    except ChunkedError as e:
        print(f"chunked graph: {e}" if not str(e).startswith("chunked graph") else str(e))
        return 1
    doc: dict[str, object] = {**graph.summary(), "files_checked": files}
    if hashes is not None:
        doc["hashes"] = hashes
    try:  # the memory plan's sizes, for a dglrun that does not see the graph (DistParMETIS)
        node_bytes, edge_bytes = data_bytes(graph)
        doc.update(node_bytes=node_bytes, edge_bytes=edge_bytes)
    except ChunkedError:
        pass
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
