"""What every program in a DGLJob's pods shares (``dglrun``, ``watcher-loop``,
``kubectl-download``): the termination message (:mod:`podprogram.termination`), the
``<prog>: ...`` log lines (:mod:`podprogram.log`), flags that override environment variables
(:mod:`podprogram.options`), SIGTERM/SIGINT handling (:mod:`podprogram.signals`) and the
``main()`` that loads a configuration, runs the program and leaves the termination message
(:mod:`podprogram.entrypoint`).

Standard library only: the images these programs run in stay light (``tests/test_layering.py``).
"""
