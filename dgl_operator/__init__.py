"""dgl-operator for its users: :mod:`dgl_operator.client` (``DGLJobClient``: submit, follow and
collect DGLJobs from Python) and :mod:`dgl_operator.cli` (``dglctl``, the same verbs in a
shell). Neither knows the operator's code: they speak to the API server, as kubectl does."""
