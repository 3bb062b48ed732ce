"""``dglrun``: distributed DGL training on the operator's pods, in five phases.

partition -> deliver -> dispatch -> configure -> train. ``cli.py`` is the entry point,
``options.py`` its flags and environment, ``runs.py`` which phases run on which pod,
``phases.py`` the phases themselves and each one's input, built once per run from the options;
each phase's work lives in the sub-package of its step:

* ``partition/``: [1/5] the graph into parts (the partition entry point, or the ParMETIS
  modes' MPI ranks), and the partition set DGL wrote;
* ``delivery/``: [2/5] and [3/5] worker *i* pulls part *i* over HTTP from the pod that holds
  the parts (the wire contract, the server, the puller);
* ``workers/``: reaching the workers (kubectl exec or local namespaces), what runs on their
  side (``remote``), the hostfile and DGL's ip_config and environment, and why a process died
  (memory, blame);
* ``storage/``: what outlives the pods on the job's claim (its layout, the partition cache,
  what each phase keeps there);
* ``training/``: [5/5] the DGL servers and trainers (``train``), and an elastic attempt's
  stop for a grow (``rescale``);
* ``report/``: how a run ends (summary, termination message, metrics) and its progress on
  the DGLJob.

What every step is checked against before it starts: ``plans/`` (``memory``, the memory plan:
every step's memory against the pods' limit; ``time``, the partition's time plan and ETA).

Beside them: ``console.py`` (phase lines and one-line errors), ``errors.py`` (the one error
base class), ``programs.py`` (every ``python -m`` program, started in safe-path mode),
``checksums.py`` (files' SHA-256) and ``checkpoints.py`` (the training script's API:
``from launcher.checkpoints import saving``). The chunked graph format is its own package,
``chunkedgraph``.
"""
