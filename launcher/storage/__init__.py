"""What outlives the pods on the job's claim (``spec.storage``): results, logs, checkpoints
and cached partitions.

``layout`` is where things go on the claim (``<storage>/runs/<run>/...``) and the checks of
the claim itself; ``cache`` the partition cache (keyed by every input of the partition phase;
``python -m launcher.storage.cache put|place`` on the workers); ``keeping`` what each phase
keeps there: partitions looked up before partitioning, the trainers' checkpoint and results
folders, dglrun's log and summary. The checkpoints' contract with the training script is
launcher.checkpoints.
"""
