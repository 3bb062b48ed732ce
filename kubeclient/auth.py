"""The credentials a request carries, asked of the ``kubernetes`` configuration at most once a
second.

A kubeconfig token, an exec plugin's token or a projected service-account token file is
renewed through the configuration's refresh hook, which the ``kubernetes`` package calls from
``auth_settings()``. The hook re-applies the whole kubeconfig each time (host, TLS files, and
the proxy settings read from the environment): asked for every request, it was 7% of the
operator's CPU in a burst of creates. :class:`AuthHeaders` asks it again once ``interval``
seconds have passed, and at once after the server answers 401 (:meth:`AuthHeaders.expire`):
a renewed token is sent from the first request after that, never more than ``interval`` late.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: How long the headers are reused before the refresh hook is asked again, in seconds.
INTERVAL = 1.0


class AuthHeaders:
    """The configuration's header credentials (``Authorization``), renewed every ``interval``
    seconds of ``now`` and after :meth:`expire`. Thread-safe: one hook call at a time."""

    def __init__(
        self,
        configuration: Any,
        interval: float = INTERVAL,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cfg = configuration
        self._interval = interval
        self._now = now
        self._lock = threading.Lock()
        self._headers: dict[str, str] = {}
        self._until: float | None = None  # None: ask at the next request

    def headers(self) -> dict[str, str]:
        """The headers to send (the caller must not change the dict)."""
        with self._lock:
            now = self._now()
            if self._until is None or now >= self._until:
                self._headers = {
                    auth["key"]: auth["value"]
                    for auth in self._cfg.auth_settings().values()
                    if auth["in"] == "header" and auth["value"]
                }
                self._until = now + self._interval
            return self._headers

    def expire(self) -> None:
        """The server refused the credentials (401): ask the hook at the next request."""
        with self._lock:
            self._until = None
