"""What every program of this project that runs in a pod shares (the operator ``dgl-operator``,
and in a DGLJob's pods ``dglrun``, ``watcher-loop`` and ``kubectl-download``): the termination
message (:mod:`podprogram.termination`), the ``<prog>: ...`` log lines (:mod:`podprogram.log`),
flags that override environment variables (:mod:`podprogram.options`), argparse types for
number flags (:mod:`podprogram.argtypes`), SIGTERM/SIGINT handling (:mod:`podprogram.signals`)
and the ``main()`` that loads a configuration, runs the program and leaves the termination
message (:mod:`podprogram.entrypoint`). Each program takes the parts it needs.

Standard library only: the images these programs run in stay light (``tests/test_layering.py``).
"""
