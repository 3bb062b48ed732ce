"""Project-wide pytest configuration: the ``control_plane`` fixture of the tests against a real
API server is the plugin localcluster/fixtures.py."""

pytest_plugins = ["localcluster.fixtures"]
