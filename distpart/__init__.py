"""Distributed partitioning for the ParMETIS modes: DGL's chunked graph format in, standard DGL
partitions out (what ``dgl.distributed.partition_graph`` writes, so ``DistGraph``,
``load_partition`` and unchanged training scripts read them).

* :mod:`distpart.convert`: ``dgl-chunk-graph``, the converter from OGB's on-disk layout or a
  saved DGLGraph to the chunked format.
* :mod:`distpart.read`: rows of a chunked column, reading only the chunk files they live in.
* :mod:`distpart.mpi`: the collective steps (alltoallv of rows, lookups at the owning rank).
* :mod:`distpart.kaminpar`: the default partitioner, KaMinPar on rank 0 (the structure
  streamed to it as a ParHIP file, the parts scattered back).
* :mod:`distpart.parmetis`: ``ParMETIS_V3_PartKway`` through ctypes (PT-Scotch's
  implementation of the ParMETIS v3 API, or a real ParMETIS with 64-bit indices).
* :mod:`distpart.pipeline`: one MPI rank's work: read its share, assign parts (KaMinPar or
  ParMETIS), renumber, ship nodes, edges and features to the rank that writes each partition.
* :mod:`distpart.write`: the DGL partition files (the only module that imports DGL).
* :mod:`distpart.memory`: each step's peak resident memory, for the log and the stats file.
* ``python -m distpart partition ...``: what dglrun starts under ``mpirun``.

The format's metadata and file checks are :mod:`chunkedgraph` (standard library only:
dglrun checks an input before any rank starts).
"""
