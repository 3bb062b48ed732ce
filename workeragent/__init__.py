"""The worker agent: the main process of each worker pod, which runs processes for dglrun.

dglrun (the launcher) used to start and follow every DGL server, trainer and MPI daemon on the
workers through ``kubectl exec``, whose streams pass through the Kubernetes API server: a
restart of the API server broke them and failed the training. The agent serves HTTP on the pod
network instead (``podcontract.AGENT_PORT``), authenticated with the job's token; a process it
runs outlives the connection that started it, and its output is kept (a ring buffer with
absolute offsets) so that dglrun can re-attach where it left off.

Modules, one concept each:

- :mod:`workeragent.settings`: the agent's flags, parsed (``AgentSettings``);
- :mod:`workeragent.procs`: the process table (output buffers, signals, the orphan reaper);
- :mod:`workeragent.server`: the HTTP API over the table and the pod's files;
- :mod:`workeragent.__main__`: ``python -m workeragent`` and the zipapp's entry point;
- :mod:`workeragent.client`: dglrun's side (``AgentClient``);
- :mod:`workeragent.rsh`: mpirun's remote shell through the agents;
- :mod:`workeragent.install`: writes the zipapp (the workers' init container runs it).

Standard library and :mod:`podcontract` only, and Python 3.9 or later: the agent runs as a
zipapp under the worker image's own ``python3``, whatever its version (no ``match``, no
``X | Y`` outside annotations).
"""
