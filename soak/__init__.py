"""A month of a shared cluster in thirty minutes: the soak (``make soak``; a small one with
``SOAK_ARGS=--small`` or e2e/multinode/test_soak.py, out of ``make test`` for its time).

On the 3-node cluster with the Coscheduling scheduler and Kueue, the operator installed with
two replicas (leader election), gang scheduling and Kueue on, a seeded run submits jobs of
every kind (:mod:`soak.kinds`) into two LocalQueues at two priorities, injects faults of every
kind at random times (:mod:`soak.faults`), and checks the invariants (:mod:`soak.invariants`)
throughout and at the end (:mod:`soak.run`). The seed draws everything (:mod:`soak.plan`):
giving it again replays the run. Any violation fails it.

Layers, the leaves first: world (kubectl and the host's view of the nodes) <- kinds, plan,
invariants <- faults <- run <- __main__.
"""

# the operator as the soak runs it: two replicas (a leader to kill), gang scheduling for the
# gang kind, Kueue for every job
OPERATOR_VALUES = {"replicas": "2", "gangScheduling": "scheduler-plugins", "kueue": "true"}
