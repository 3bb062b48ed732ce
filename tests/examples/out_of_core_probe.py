"""Run with the DGL interpreter (PYTHONPATH: the checkout): outofcore's patch in one process
against a real 2-part partition whose features were exported (``python -m outofcore export``).
Prints one JSON object of what it saw; tests/examples/test_out_of_core.py asserts on it.

    python out_of_core_probe.py PART_CONFIG REGISTRY_FILE
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")

import torch
from dgl.data.utils import load_tensors
from dgl.distributed import dist_graph, kvstore, rpc

from outofcore import layout, patch


def main() -> None:
    config, registry = sys.argv[1], sys.argv[2]
    os.environ[patch.REGISTRY_ENV] = registry
    part0 = Path(config).parent / "part0"
    in_memory = load_tensors(str(part0 / "node_feat.dgl"))
    seen: dict[str, object] = {"keys": sorted(in_memory)}
    # the files hold node_feat.dgl's rows, dtypes and shapes exactly
    files = layout.read_index(part0)
    seen["files_equal"] = sorted(files) == sorted(in_memory) and all(
        torch.equal(torch.from_numpy(layout.open_rows(files[k]).copy()), in_memory[k])
        for k in in_memory
    )
    # rows start on a page: a 4 KiB row is one page
    seen["aligned"] = all(
        getattr(layout.open_rows(f), "offset", None) == layout.DATA_OFFSET for f in files.values()
    )
    originals = (
        dist_graph.load_partition_feats,
        kvstore.empty_shared_mem,
        rpc.copy_data_to_shared_memory,
        kvstore.KVClient.pull,
        kvstore.default_pull_handler,
    )
    patch.install()
    patch.install()  # idempotent
    nodes, edges = dist_graph.load_partition_feats(config, 0)
    seen["loaded_equal"] = all(torch.equal(nodes[k], in_memory[k]) for k in in_memory)
    seen["edges_loaded"] = edges is not None
    feat = nodes["_N/feat"]
    # memory-mapped: the tensor's memory is the file's mapping, and one mapping per file
    maps = Path("/proc/self/maps").read_text()
    seen["feat_file_mapped"] = str(files["_N/feat"]) in maps
    seen["one_mapping"] = patch.mapped(files["_N/feat"]).data_ptr() == feat.data_ptr()
    # the server's init_data: the shared memory DGL asks for is the mapped file, no copy
    name = "node~_N~feat" + patch.SHM_SUFFIX
    shape, dtype = tuple(feat.shape), str(feat.numpy().dtype)
    served = torch.utils.dlpack.from_dlpack(
        kvstore.empty_shared_mem(name, True, shape, dtype).to_dlpack()
    )
    seen["served_is_mapped"] = served.data_ptr() == feat.data_ptr()
    rpc.copy_data_to_shared_memory(served, feat)  # skipped: the same memory
    # a server answering a pull: the rows' pages prefetched (sorted, merged), then DGL's gather
    ids = torch.tensor([7, 3, 3, 4, 900, 5])
    copy = Path(registry).with_name("feat-copy.npy")  # (a file no mapping has touched)
    shutil.copyfile(files["_N/feat"], copy)
    rows = layout.open_rows(copy, random=True)
    fd = os.open(copy, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # out of the page cache
    os.close(fd)
    seen["ranges"] = layout.prefetch(rows, ids.numpy())
    pulled = kvstore.default_pull_handler({"f": served}, "f", ids)
    seen["pull_equal"] = torch.equal(pulled, in_memory["_N/feat"][ids])
    # what a trainer (another process) finds: the registry names every node feature
    doc = json.loads(Path(registry).read_text())
    seen["registered"] = sorted(doc)
    # an unregistered name (a DistTensor a trainer makes) still gets DGL's shared memory
    other = kvstore.empty_shared_mem("probe-other" + patch.SHM_SUFFIX, True, (4, 2), "float32")
    seen["unregistered_is_dgl"] = type(other).__name__ == "NDArray"
    # a file that does not match what DGL expects is refused, naming the file
    try:
        kvstore.empty_shared_mem(name, False, (shape[0] + 1, *shape[1:]), dtype)
        seen["mismatch"] = "accepted"
    except patch.OutOfCoreError as e:
        seen["mismatch"] = str(e)
    try:
        patch.check_version("2.2.0")
        seen["version"] = "accepted"
    except patch.OutOfCoreError as e:
        seen["version"] = str(e)
    patch.uninstall()
    seen["restored"] = (
        dist_graph.load_partition_feats,
        kvstore.empty_shared_mem,
        rpc.copy_data_to_shared_memory,
        kvstore.KVClient.pull,
        kvstore.default_pull_handler,
    ) == originals
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
