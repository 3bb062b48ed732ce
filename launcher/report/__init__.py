"""How dglrun tells how a run goes and how it ended.

``progress`` publishes the short progress text to the DGLJob's ``status.progress`` (and its
Events); ``outcome`` ends a run: its last line and exit code, the pod's termination message,
the summary kept on the job's storage, the training's metrics and the memory measured against
the plan.
"""
