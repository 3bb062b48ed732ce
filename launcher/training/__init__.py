"""Step 5, train: the DGL servers and trainers on every worker, and an elastic attempt's
stop for a grow.

``train`` runs phase 5 from one ``TrainingRequest`` (the servers, then the trainers; the
first failure stops all and is named); ``rescale`` is an elastic attempt's side: the
partitioner's worker count, and the stop at an epoch boundary when the operator asks for a
grow (``RESCALE_EXIT_CODE``).
"""
