"""controller/machinery/metrics_server.py's Reviewer: what it answers, and that it asks the
API server again only once a decision is DECISION_TTL old (the live test:
tests/prometheus/test_secure_metrics.py)."""

from __future__ import annotations

from typing import Any

from controller.machinery import metrics_server as ms
from kubeclient import Obj, Resource, TransportError


class Reviews:
    """The two review APIs, answering from tables (token -> user, user -> allowed)."""

    def __init__(self, users: dict[str, str], allowed: set[str]) -> None:
        self.users, self.allowed, self.calls = users, allowed, 0
        self.down = False

    def create(self, res: Resource, namespace: str | None, body: Obj, **_: Any) -> Obj:
        self.calls += 1
        if self.down:
            raise TransportError("connection refused")
        if res == ms.TOKENREVIEWS:
            user = self.users.get(body["spec"]["token"])
            return {"status": {"authenticated": user is not None, "user": {"username": user}}}
        assert body["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


def test_decisions_and_their_time_to_live() -> None:
    now = [0.0]
    api = Reviews({"t-prom": "prom", "t-other": "other"}, {"prom"})
    r = ms.Reviewer(api, clock=lambda: now[0])  # type: ignore[arg-type]
    assert r.decide(None, "/metrics") == ms.Decision(401, "Unauthorized")
    assert r.decide("Basic abc", "/metrics").code == 401
    assert api.calls == 0  # (no token: nothing asked)
    assert r.decide("Bearer nope", "/metrics").code == 401
    assert r.decide("Bearer t-other", "/metrics") == ms.Decision(
        403, "Authorization denied for user other"
    )
    assert r.decide("Bearer t-prom", "/metrics") == ms.Decision(200)
    asked = api.calls
    now[0] = ms.DECISION_TTL - 1
    assert r.decide("Bearer t-prom", "/metrics").code == 200 and api.calls == asked
    now[0] = ms.DECISION_TTL + 1  # asked again: a revoked grant is seen within the TTL
    api.allowed.clear()
    assert r.decide("Bearer t-prom", "/metrics").code == 403
    api.down = True
    now[0] += ms.DECISION_TTL + 1
    assert r.decide("Bearer t-prom", "/metrics") == ms.Decision(500, "Internal Server Error")
    api.down = False
    assert r.decide("Bearer t-prom", "/metrics").code == 403  # (a 500 is not kept)
