"""The benchmarks: each ``bench/<name>.py`` measures one thing and prints its figures, never
asserts them (``make bench`` runs them all, ``make demo-large`` runs demo_large).

Run one from the repository's root as a module, ``python -m bench.<name> [--help]`` (or as
``python bench/<name>.py`` with the root on ``PYTHONPATH``, as the Makefile exports it). What
more than one benchmark needs (the cluster, kubectl, the DGLJobs, the graphs, the memory
measurements) is in :mod:`bench.support`, imported like any other package: a benchmark imports
that, ``localcluster`` and the product packages, never another benchmark
(tests/test_layering.py).
"""
