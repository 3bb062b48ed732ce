"""The job's NetworkPolicy (``--network-policy``, the chart's ``networkPolicy.enabled``): its
pods take connections from its own pods only. Made once, before any pod."""

from __future__ import annotations

from controller.api import DGLJob
from controller.builders.kind import ChildKind
from controller.builders.meta import JOB_NAME_LABEL, _meta
from controller.builders.options import BuildOptions
from controller.machinery.slim import slim_metadata
from kubeclient import NETWORKPOLICIES, Obj

NAME = "network"


def network_policy(job: DGLJob) -> Obj:
    """``<job>-pods``: every pod of the job (partitioner, workers, launcher, the
    probe) takes connections from this job's own pods only, in its namespace; none from any
    other pod or namespace (where the network plugin enforces NetworkPolicy: the chart's
    ``networkPolicy.enabled``, docs/operations.md). Any port of the job's own: DGL's clients,
    torch's gloo pairs and Open MPI's daemons listen on ports the kernel picks, beside the
    fixed ones (DGL servers pc.DGL_PORT.., the partition server pc.TRANSFER_PORT). What is
    not a pod is not named: the kubelet's probes and the API server's exec come from the
    node, which NetworkPolicy implementations admit."""
    own = {"podSelector": {"matchLabels": {JOB_NAME_LABEL: job.name}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(job, network_policy_name(job)),
        "spec": {
            "podSelector": {"matchLabels": {JOB_NAME_LABEL: job.name}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [own]}],
        },
    }


def network_policy_name(job: DGLJob) -> str:
    return f"{job.name}-pods"


def _network_policy(options: BuildOptions) -> bool:
    return options.network_policy


class Network:
    """The feature's entry (controller/features/registry.py): the NetworkPolicy, made before
    the job's accounts, and watched."""

    name = NAME
    before_rbac = True
    kinds = (
        ChildKind(NETWORKPOLICIES, once=True, enabled=_network_policy, transform=slim_metadata),
    )

    def children(self, job: DGLJob, opts: BuildOptions, token: str) -> list[Obj]:
        return [network_policy(job)] if opts.network_policy else []


NETWORK = Network()
