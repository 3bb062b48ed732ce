"""Project-wide pytest configuration: the real-API-server fixtures live in e2e/fixtures.py."""

pytest_plugins = ["e2e.fixtures"]
