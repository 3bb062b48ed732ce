"""How dglrun tells how a run goes and how it ended.

``progress`` publishes the short progress text to the DGLJob's ``status.progress`` and, for
every reader to act on, its values to ``status.progressDetail`` (``eta``: the step, the epochs
done and their total, the percentage, the ETAs, the metrics), and its Events; ``outcome`` ends
a run: its last line and exit code, the pod's termination message, the summary kept on the
job's storage, the training's metrics and the memory measured against the plan.
"""
