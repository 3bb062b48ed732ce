"""``Obj``: a Kubernetes object (or list, event, Status, patch) as its decoded JSON dict.

The project never uses generated model classes: every object crosses the API boundary, the
informers' caches and the controller as this one alias, defined here only.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
