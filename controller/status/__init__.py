"""What the job's pods say, and the status that follows from it: pure functions, no API calls.

One module per concern:

* ``conditions``: the DGLJob's condition types, reasons and phases; reading and setting a
  condition; the timestamps;
* ``pod_state``: what one pod says (phase, active, ready, started, containers, node);
* ``failures``: why a pod failed (``PodFailure``) and the reason the job takes from it;
* ``observation``: the job's pods sorted out for one sync, the ``replicaStatuses`` counts,
  the running phase;
* ``waiting``: why the job's pods wait (unschedulable, an image not pulled, ...);
* ``node_loss``: nodes that can no longer run the job's pods;
* ``rebase``: our status changes re-applied on a conflict.
"""
