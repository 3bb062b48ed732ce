"""What every DGL server and trainer dglrun starts runs under.

    python -P -m dglprocess run SCRIPT [ARGS...]

runs ``SCRIPT`` as ``python SCRIPT ARGS`` would, after :mod:`dglprocess.start` has taken DGL
2.1's two fixed 3-second waits out of the job's start (``python -m outofcore run``, the
out-of-core workers' runner, does the same after its own patch). On a two-worker job here
they were 5 to 6 s of a training phase of about 19 s; ``bench/pipeline_bench.py`` measures
the whole run with and without them (best of 4: 22.6 s against 26.1 s):

* **a trainer connecting early.** Trainers start beside the servers and are ready before the
  servers listen. DGL's socket backend retries a refused connection 3 s later. A trainer's
  ``connect_to_server`` now first waits until the servers of its own machine listen (seen in
  ``/proc/net/tcp``, never by connecting: a server accepts a fixed number of connections),
  and :data:`start.PEERS_GRACE` more for the other machines' servers, which started with
  them; its first connection is then taken.
* **a server waiting for the trainers' receivers.** Once every trainer has registered, a DGL
  2.1 server sleeps 3 s before it connects back to them, although a trainer listens right
  after it registers and a refused connection would be retried. It now waits
  :data:`start.RECEIVERS_WAIT` seconds.

Both are pinned to DGL 2.1 (:data:`start.SUPPORTED`); under another DGL, or with
``DGL_OPERATOR_FAST_START=0``, the script runs as DGL starts it. The standard library only:
DGL's module is changed as the script imports it, so a script that does not import DGL pays
nothing for it.
"""
