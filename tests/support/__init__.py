"""Helpers shared by more than one test area (tests/<area>/, e2e/): the one place test code
imports shared helpers from, instead of another area's conftest.py or test module.

* :mod:`tests.support.paths` - the checkout's files the tests read (chart, CRD, rules);
* :mod:`tests.support.prerequisites` - a missing tool or privilege: fail in CI, skip elsewhere;
* :mod:`tests.support.waiting` - polling until a condition holds (the one ``wait_for``);
* :mod:`tests.support.threads` - starting a daemon thread, joining it without hanging, and
  waiting until a thread is blocked (``wait_parked``) instead of sleeping;
* :mod:`tests.support.dgljobs` - the seed DGLJob manifests (fixtures/) and jobs made from them;
* :mod:`tests.support.malformed` - malformed DGLJobs and the field each rejection names;
* :mod:`tests.support.apiserver` - the real-API-server fixtures (``api``, ``crd``,
  ``namespace``), re-exported by the conftest.py of the areas that use them;
* :mod:`tests.support.live` - the operator in this process and a test kubelet;
* :mod:`tests.support.tools` - hack/tools.sh's binaries (promtool, prometheus, helm);
* :mod:`tests.support.prometheus` - a real Prometheus scraping the operator;
* :mod:`tests.support.dgl_python` - the DGL interpreter (a virtualenv of its own).

Support imports product packages and localcluster, never a test area, e2e or bench
(tests/test_layering.py); nothing imports a conftest.py or a test_*.py module.
"""
