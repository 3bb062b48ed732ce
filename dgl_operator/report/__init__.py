"""A report of one DGLJob as a self-contained HTML page (``dglctl report``): what happened to
every pod and attempt, and when; each pod's memory against its limit and dglrun's plan; the
partition's steps; the bytes moved; the Events. :mod:`~dgl_operator.report.readings` reads the
objects and logs (pure), :mod:`~dgl_operator.report.page` draws them; the client collects them
(:mod:`dgl_operator.client.report`)."""
