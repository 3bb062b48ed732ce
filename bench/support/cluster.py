"""This machine's cluster (localcluster's nodes under ~/.cache/dgl-operator/node) with this
tree's operator, as the benchmarks use it: the one that runs, brought up if it is down
(:func:`cluster`), or one of their own shape, brought up and taken down by the benchmark
(``localcluster.node``'s ``main(["up", ...])`` and ``main(["down"])``; :func:`install`).

A benchmark leaves the cluster as it found it: :func:`cluster` takes down, when the benchmark's
process exits, a cluster it brought up, and deletes a namespace it made in one that ran."""

from __future__ import annotations

import atexit

from bench.support.manifests import NS
from localcluster.helm import install_operator
from localcluster.kubectl import Kubectl
from localcluster.node import DEFAULT_DIR, refresh_images, running
from localcluster.node import main as node_main

KUBECONFIG = DEFAULT_DIR / "control-plane" / "admin.kubeconfig"


def install(values: dict[str, str] | None = None) -> None:
    """This tree's operator (its images refreshed on the nodes) installed by Helm into the
    running cluster, with the chart's ``values``."""
    install_operator(KUBECONFIG, refresh_images().get("dgl-operator", ""), values)


def cluster(namespace: str = NS) -> Kubectl | None:
    """The single-node cluster (brought up if down) with this tree's operator and images,
    and ``namespace``; None if the cluster cannot come up. What it brought up, or made, is
    undone when the process exits (:mod:`atexit`)."""
    if not (running(DEFAULT_DIR) and KUBECONFIG.exists()):
        atexit.register(node_main, ["down"])  # (also when it did not come up whole)
        if node_main(["up"]) != 0:
            return None
    install()
    kube = Kubectl(KUBECONFIG)
    if not kube.run("get", "namespace", namespace, "--ignore-not-found", "-o", "name").strip():
        kube.run("create", "namespace", namespace)
        atexit.register(kube.run, "delete", "namespace", namespace, "--wait=false", check=False)
    return kube
