"""What any controller needs and nothing of a DGLJob: typed views of the API's objects, our
own writes kept until the caches show them, expectations, Events, the applier of children,
the status write's plan, a controller's metrics, leader election and the cached objects'
slimming. The floor below the job logic (tests/test_layering.py, CONTROLLER_FLOORS)."""
