"""Out-of-core workers: a partition's node features stay on the worker's local disk.

DGL 2.1's servers read a partition's node features into memory (``load_partition_feats``), copy
them into shared memory (``KVServer.init_data``), and the trainers map that shared memory. With
``dglrun --out-of-core`` (a DGLJob's ``spec.outOfCore``) instead:

* partitioning also writes each part's node features as plain ``.npy`` files, in the part's row
  order (:mod:`outofcore.layout`; ``distpart`` writes them with the part, the DGL-API path
  converts the part's ``node_feat.dgl`` once: ``python -m outofcore export``);
* every DGL server and trainer runs under ``python -m outofcore run SCRIPT ...``, which installs
  :mod:`outofcore.patch` (DGL 2.1 only) and then runs the script: the servers register those
  files memory-mapped instead of copying them, and the trainers map the same files. The kernel
  pages features in on demand and drops them under memory pressure, so a pod needs memory for
  the graph's structure, the minibatches and a share of the features as page cache, not for
  all of its features;
* the pages are read before they are needed, off the training thread (:mod:`outofcore.reader`):
  a server whose pod has room for all its features reads them in their on-disk order at
  start, and each minibatch's rows are asked for as the loader samples it (a training loop
  that samples a few minibatches ahead, as the example's does, then trains while they are
  read), on this machine and, by a word to their server, on the others;
* in buffer order (``spec.outOfCore.order: Buffer``) a training loader walks each epoch
  through buffer states of whole partitions instead (:mod:`outofcore.order` plans them,
  :mod:`outofcore.buffer` samples inside them and has them read in sequence).

:mod:`outofcore.layout` and :mod:`outofcore.reader` are numpy-only (distpart writes with the
layout); :mod:`outofcore.patch` and :mod:`outofcore.__main__` need DGL and torch: they run
where DGL runs (partitioner, workers).
"""
