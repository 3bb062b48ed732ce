"""The real-API-server fixtures (tests/support/apiserver.py) for the tests of this folder."""

from tests.support.apiserver import api, crd, namespace  # noqa: F401
