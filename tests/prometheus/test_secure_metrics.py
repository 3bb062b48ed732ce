"""``--metrics-secure`` (the chart's metrics.secure) against a real API server and a real
Prometheus: /metrics is served over TLS, and only to a caller whose ServiceAccount token the
API server authenticates and whose account may ``get`` the URL /metrics; a scrape with the
token works, one without gets 401, one of an account without the grant 403."""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeclient import SERVICEACCOUNTS, NotFound, Resource, RestClient
from localcluster.cluster import ControlPlane
from localcluster.operator_process import OperatorProcess
from tests.support.prometheus import PrometheusServer
from tests.support.rbac import METRICS_READER_RULES
from tests.support.waiting import wait_for

RBAC = "rbac.authorization.k8s.io"
CLUSTERROLES = Resource(RBAC, "v1", "clusterroles", "ClusterRole", False)
CLUSTERROLEBINDINGS = Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False)


def self_signed(d: Path) -> Path:
    d.mkdir(parents=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "tls.key", "-out", "tls.crt", "-days", "1", "-subj", "/CN=metrics",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=d, check=True, capture_output=True,
    )  # fmt: skip
    return d


@pytest.fixture
def accounts(api: RestClient, namespace: str) -> Iterator[dict[str, str]]:
    """Two ServiceAccounts' tokens: ``reader`` bound to a ClusterRole of the chart's
    metrics-reader rules, ``stranger`` bound to nothing."""
    role = f"{namespace}-metrics-reader"
    api.create(CLUSTERROLES, None, {"metadata": {"name": role}, "rules": METRICS_READER_RULES})
    api.create(
        CLUSTERROLEBINDINGS,
        None,
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )  # fmt: skip
    tokens = {}
    try:
        for name in ("reader", "stranger"):
            api.create(SERVICEACCOUNTS, namespace, {"metadata": {"name": name}})
            request = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            }
            made = api.create(SERVICEACCOUNTS, namespace, request, name=name, subresource="token")
            tokens[name] = made["status"]["token"]
        yield tokens
    finally:
        for res in (CLUSTERROLEBINDINGS, CLUSTERROLES):
            with contextlib.suppress(NotFound):
                api.delete(res, None, role)


def get(url: str, ca: Path, token: str | None = None) -> tuple[int, str]:
    """(status, body) of a GET verifying the server's certificate against ``ca``."""
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode()


def test_only_a_caller_the_api_server_admits_reads_the_metrics(
    control_plane: ControlPlane,
    namespace: str,
    accounts: dict[str, str],
    prometheus: Path,
    tmp_path: Path,
) -> None:
    certs = self_signed(tmp_path / "certs")
    ca = certs / "tls.crt"
    op = OperatorProcess(
        control_plane.kubeconfig, tmp_path / "operator.log", "--namespace", namespace,
        "--metrics-secure", "--metrics-cert-dir", str(certs), metrics=True,
    )  # fmt: skip
    op.start()
    prom = None
    try:
        op.wait_ready(timeout=60)
        url = f"https://127.0.0.1:{op.metrics_port}/metrics"
        assert get(url, ca) == (401, "Unauthorized\n")
        assert get(url, ca, "not-a-token") == (401, "Unauthorized\n")
        user = f"system:serviceaccount:{namespace}:stranger"
        assert get(url, ca, accounts["stranger"]) == (
            403,
            f"Authorization denied for user {user}\n",
        )
        code, body = get(url, ca, accounts["reader"])
        assert code == 200 and "dgl_operator_is_leader" in body, body[:500]
        assert get(f"https://127.0.0.1:{op.metrics_port}/other", ca, accounts["reader"])[0] == 404
        # TLS only: a plain request gets no metrics
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/metrics", timeout=5).read()

        token_file = tmp_path / "token"
        token_file.write_text(accounts["reader"])
        target = {"targets": [f"127.0.0.1:{op.metrics_port}"]}
        tls = {"ca_file": str(ca)}
        prom = PrometheusServer(
            prometheus,
            tmp_path,
            target["targets"][0],
            scrape_configs=[
                {"job_name": "with-token", "scheme": "https", "tls_config": tls,
                 "authorization": {"credentials_file": str(token_file)},
                 "static_configs": [target]},
                {"job_name": "without-token", "scheme": "https", "tls_config": tls,
                 "static_configs": [target]},
            ],
        ).start()  # fmt: skip

        def scraped() -> bool:
            return (
                prom is not None
                and prom.value('up{job="with-token"}') == 1.0
                and prom.value('up{job="without-token"}') == 0.0
            )

        wait_for(scraped, what="Prometheus's two scrapes", timeout=60, interval=0.5)
        assert prom.value('count(dgl_operator_is_leader{job="with-token"})') == 1.0
        assert prom.value('count(dgl_operator_is_leader{job="without-token"})') is None
        targets = prom.api("targets")["activeTargets"]
        refused = next(t for t in targets if t["labels"]["job"] == "without-token")
        assert "401" in refused["lastError"], json.dumps(refused)
    finally:
        if prom is not None:
            prom.stop()
        op.terminate(timeout=30)
        op.kill()
        print("--- operator log ---\n" + op.tail())
