"""The DGLJob API's names: its group, version and kind, its replica types, the values of its
enumerated fields (the CRD's ``enum`` lists, their defaults first), its defaults and bounds.
(spec.partitionMode's and spec.chunkedGraph.layout's values are dglrun's too: podcontract's.)
Both sides of the API spell them from here: the parser and the builders (the controller), and
the users' client."""

from __future__ import annotations

GROUP = "qihoo.net"
VERSION = "v1alpha1"
KIND = "DGLJob"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "dgljobs"
JOB_NAME_LABEL = "dgl.qihoo.net/job-name"  # on every object the operator makes for a job


def run_name(name: str, uid: str) -> str:
    """A job's folder on its storage (launcher/storage/layout.py): every restart shares it, a
    new job of the same name does not."""
    return f"{name}-{uid[:8]}"


# Replica types
LAUNCHER = "Launcher"
WORKER = "Worker"
PARTITIONER = "Partitioner"
REPLICA_TYPES = (LAUNCHER, PARTITIONER, WORKER)
# not a replica type of the spec: an elastic job's room-finder for its next partitioner
# (controller/lifecycle/elastic.py), labelled as the replicas are
PROBE = "Probe"

# spec.partitionTransfer: how the parts reach the workers (the modes with a Partitioner pod)
TRANSFER_HTTP = "HTTP"  # each worker pulls its part straight from the partitioner pod
TRANSFER_KUBECTL = "KubectlCp"  # the original's kubectl cp: accepted, served as HTTP (parse.py)
PARTITION_TRANSFERS = (TRANSFER_HTTP, TRANSFER_KUBECTL)

# spec.cleanPodPolicy
CLEAN_RUNNING = "Running"
CLEAN_ALL = "All"
CLEAN_NONE = "None"
CLEAN_POD_POLICIES = (CLEAN_RUNNING, CLEAN_ALL, CLEAN_NONE)

# spec.launcherCreationPolicy
WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"
AT_STARTUP = "AtStartup"
LAUNCHER_CREATION_POLICIES = (WAIT_FOR_WORKERS_READY, AT_STARTUP)

# spec.storage.claimPolicy: what becomes of a claim made from spec.storage.claimTemplate
CLAIM_RETAIN = "Retain"  # it outlives the job (the default: results are what it is for)
CLAIM_DELETE = "Delete"  # the job owns it: the garbage collector deletes it with the job
CLAIM_POLICIES = (CLAIM_RETAIN, CLAIM_DELETE)

# defaults and bounds the CRD states too
DEFAULT_SETTLE_SECONDS = 30
DEFAULT_COOLDOWN_SECONDS = 60
MAX_REPLICAS = 10000
MAX_SLOTS_PER_WORKER = 1024
MAX_BACKOFF_LIMIT = 100
MAX_SETTLE_SECONDS = 3600
MAX_COOLDOWN_SECONDS = 86400
MAX_NAME = 63  # DNS-1035 label: pod hostnames, Service names, label values

# The service accounts the operator makes for each job, <job><suffix>: its launcher's and its
# partitioner's, with rights on that job's pods. No template may name one (dgljob.parse), of
# this job or of any other, made yet or not.
OPERATOR_ACCOUNT_SUFFIXES = ("-launcher", "-partitioner")
# a pod's service account, as a template may name it (serviceAccount: the deprecated alias)
ACCOUNT_FIELDS = ("serviceAccountName", "serviceAccount")
