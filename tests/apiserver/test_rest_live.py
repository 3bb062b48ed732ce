"""kubeclient.RestClient against a real kube-apiserver, where the fake cannot vouch for it."""

from __future__ import annotations

from kubeclient import PODS, RestClient


def test_create_metadata_only_is_what_the_api_server_answers(
    api: RestClient, namespace: str
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    out = api.create(PODS, namespace, body, metadata_only=True)
    assert out["kind"] == "PartialObjectMetadata" and out["apiVersion"] == "meta.k8s.io/v1"
    assert set(out) == {"kind", "apiVersion", "metadata"}
    assert out["metadata"]["labels"] == {"app": "x"}
    stored = api.get(PODS, namespace, "p")
    assert stored["metadata"]["uid"] == out["metadata"]["uid"]
    assert stored["status"]["phase"] == "Pending"  # what the sync assumes of a pod it created
