"""The workers: how dglrun reaches them and what runs on their side (steps 3 to 5).

``transport`` is the interface (start a process, copy, run everywhere in parallel), with its
implementations: ``agent`` (each worker pod's agent, workeragent/: a launcher pod's), ``local``
(network namespaces on this machine) and ``kubectl`` (``kubectl cp`` and kubexec.sh: only the
partitioner's copy into a launcher, for dglrun's ``--partition-transfer kubectl``, which the
operator no longer asks for). ``remote`` is what runs on a worker under every command
(sessions, pidfiles, peak memory, manifests). ``hostfile`` reads the operator's hostfile and
writes DGL's ip_config, ``dgl_env`` is DGL's process environment contract, ``oom`` tells a
process the kernel killed for memory, and ``blame`` names the trainer whose failure caused the
others'.
"""
