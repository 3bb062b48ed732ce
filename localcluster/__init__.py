"""The Kubernetes on this machine (one node or several), built from packages (no Docker, no
kind).

Development tooling, not part of the installed operator: ``make demo``, ``make cluster-up``,
the tests against a real API server (tests/apiserver, tests/chart, tests/prometheus), the
image tests, the e2e tests and the benchmarks use it.

* :mod:`localcluster.cluster` - the control plane: etcd + kube-apiserver +
  kube-controller-manager on 127.0.0.1 (``python -m localcluster.cluster up|down``);
* :mod:`localcluster.node` - the whole cluster: that control plane plus kube-scheduler (and the
  Coscheduling scheduler on request) and per node a kubelet, a containerd and a CNI bridge, the
  images imported (``python -m localcluster.node up [--nodes N]|stop-node NAME|down``);
* :mod:`localcluster.volumes` - the node's StorageClass and static hostPath volumes;
* :mod:`localcluster.helm` - the operator's chart installed with the real helm;
* :mod:`localcluster.operator_process` - ``dgl-operator`` as a process of its own;
* :mod:`localcluster.demo` - ``make demo`` (``python -m localcluster.demo [DGLJOB.yaml]``);
* :mod:`localcluster.fixtures` - the pytest plugin with the ``control_plane`` fixture.

It imports no project package (the operator runs as a subprocess) and nothing of tests/,
e2e/ or bench/ (tests/test_layering.py).
"""
