"""What any controller needs and nothing of a DGLJob: typed views of the API's objects, our
own writes kept until the caches show them, expectations, Events, the applier of children,
the status write's plan, metrics, leader election, the cached objects' slimming and the
operator's RBAC. The floor below the job logic (tests/test_layering.py, CONTROLLER_FLOORS)."""
