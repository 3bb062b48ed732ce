"""What more than one benchmark uses, one concept per module (the leaves first):

* :mod:`bench.support.paths` - the checkout's folders the benchmarks read (the example);
* :mod:`bench.support.console` - a benchmark's progress lines, prefixed with its name;
* :mod:`bench.support.manifests` - the DGLJobs the benchmarks run: the partition benchmarks'
  own, and the examples' manifests renamed and edited;
* :mod:`bench.support.cluster` - this machine's cluster (localcluster) with this tree's
  operator installed;
* :mod:`bench.support.graphs` - synthetic graphs for the benchmarks, generated and chunked once,
  and the DGL interpreter's environment;
* :mod:`bench.support.measure` - peaks: a process's (``wait4``), a pod's and a cgroup's memory
  (cgroup v1), and memory cgroups of the benchmark's own.
* :mod:`bench.support.progress` - a job's epochs done and whether it trains, from its typed
  ``status.progressDetail``.

Nothing here imports a benchmark. kubectl against a cluster is localcluster.kubectl's
(the soak's too).
"""
