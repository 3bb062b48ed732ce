"""An in-memory fake of the Kubernetes API for unit tests (tests/fakekube/server.py)."""

from tests.fakekube.server import (
    Action,
    FakeKube,
    FakeWatch,
    json_merge_patch,
    json_patch,
    match_label_selector,
    parse_label_selector,
)

__all__ = [
    "Action",
    "FakeKube",
    "FakeWatch",
    "json_merge_patch",
    "json_patch",
    "match_label_selector",
    "parse_label_selector",
]
