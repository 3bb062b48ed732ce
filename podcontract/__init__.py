"""The pod contract: every name the operator and the programs in a DGLJob's pods agree on.

The operator (``controller.builders``) writes these names into the pods it builds: environment
variables, mount paths, ports, container names. The programs in those pods (``dglrun``,
``watcher-loop``, ``kubectl-download``) read them; ``dglrun`` writes back what the operator
reads (the status fields it patches, the first words of its termination messages). Each name
is spelled once, here or, for a variable the operator sets for dglrun, in its declaration in
``podcontract.settings`` (its name, default, and how it is written and read), and imported on
both sides: neither side spells one of them itself.
``tests/test_pod_contract.py`` builds the pods for real DGLJobs and parses them with the
programs' own parsers.

Standard library only (nothing at all, in fact): every image imports it.
"""

from __future__ import annotations

# -- mounts: the job's ConfigMap, kubectl, the workspace, the storage, the transfer token --------

CONFIG_DIR = "/etc/dgl"  # the ConfigMap ``<job>-config``: one file per key
KUBEXEC_KEY = "kubexec.sh"  # ``kubexec.sh <pod> <command>``: kubectl exec (MPI's remote shell)
HOSTFILE_KEY = "hostfile"  # ``<ip> <port> <pod> slots=N``: one line per worker with an IP
PARTFILE_KEY = "partfile"  # ``<ip> <port> <pod>``: the partitioner pod, once it has an IP
LEADFILE_KEY = "leadfile"  # ``<ip> <port> <pod>``: the launcher pod, once it has an IP
KUBEXEC_PATH = f"{CONFIG_DIR}/{KUBEXEC_KEY}"
HOSTFILE_PATH = f"{CONFIG_DIR}/{HOSTFILE_KEY}"
PARTFILE_PATH = f"{CONFIG_DIR}/{PARTFILE_KEY}"
LEADFILE_PATH = f"{CONFIG_DIR}/{LEADFILE_KEY}"
KUBE_DIR = "/opt/kube"  # kubectl-download installs kubectl here (an emptyDir)
KUBECTL_PATH = f"{KUBE_DIR}/kubectl"
WORKSPACE = "/dgl_workspace"  # dglrun's default --workspace
DATASET = "dataset"  # the partitions in the workspace (KubectlCp: a volume the partitioner fills)
DATASET_DIR = f"{WORKSPACE}/{DATASET}"
STORAGE_DIR = "/dgl_storage"  # spec.storage's claim, in every pod of the job
STORAGE_RUNS = "runs"  # <storage folder>/runs/<run name>/: one run's files ...
RUN_OUTPUT = "output"  # ... its results there (status.results points at them)
TRANSFER_DIR = "/etc/dgl-transfer"  # partitionTransfer HTTP: the job's token Secret
TRANSFER_TOKEN_KEY = "token"
TRANSFER_TOKEN_PATH = f"{TRANSFER_DIR}/{TRANSFER_TOKEN_KEY}"

# -- ports ---------------------------------------------------------------------------------------

DGL_PORT = 30050  # the hostfile's port: DGL server k on a worker binds DGL_PORT + k
DGL_PORT_COUNT = 20  # the worker pods expose DGL_PORT .. DGL_PORT + DGL_PORT_COUNT - 1
TRANSFER_PORT = 30070  # the partitioner's partition server (HTTP) ...
TRANSFER_READY_PATH = "/ready"  # ... answers here once it serves: its readiness probe

# -- the worker agent: dglrun reaches each worker's processes through it, over the pod network --

AGENT_DIR = "/opt/dgl-agent"  # an emptyDir in each worker: its init container installs the agent
AGENT_ZIPAPP = f"{AGENT_DIR}/dgl-agent.pyz"  # ... as one file the worker image's Python runs
AGENT_INIT_CONTAINER = "dgl-agent-install"  # that init container (the operator's image)
AGENT_PORT = 30071  # each worker's agent (HTTP; every request but the probe's carries the token)
AGENT_HEALTH_PATH = "/healthz"  # answers without a token once the agent serves: the probe
AGENT_TOKEN_PATH = TRANSFER_TOKEN_PATH  # the job's Secret, in the workers and the launcher
AGENT_ORPHAN_GRACE = 120.0  # seconds with no word from dglrun before an agent stops its processes
# mpirun's remote shell (``<it> <pod> <command...>``: workeragent.rsh), in the job's ConfigMap:
# the orted daemons check that their own plm_rsh_agent path exists, so it is one every pod has
AGENT_RSH_KEY = "agent-rsh"
AGENT_RSH_PATH = f"{CONFIG_DIR}/{AGENT_RSH_KEY}"

# -- dglrun's environment ------------------------------------------------------------------------
# Each variable the operator sets for dglrun is declared once, its name and default included,
# in podcontract/settings.py. Here: the values they take that both sides name.

# Which part of the work the pod's dglrun does (settings.PHASE; unset in the launcher of a job
# with workers)
PHASE_PARTITIONER = "Partitioner"  # the partitioner pod: partition and deliver
PHASE_LAUNCHER_WORKLOAD = "Launcher_Workload"  # Skip mode: train alone in the launcher

# spec.partitionMode as dglrun's --partition-mode (Skip is PHASE_LAUNCHER_WORKLOAD instead)
DGL_API = "DGL-API"
PARMETIS = "ParMETIS"
DIST_PARMETIS = "DistParMETIS"
PARTITION_MODES = (DGL_API, PARMETIS, DIST_PARMETIS)
# spec.outOfCore.order: Exact reads the rows the minibatches pull, in their order (the losses
# of the in-memory run); Buffer trains in MariusGNN's buffer order (outofcore.buffer)
ORDER_EXACT, ORDER_BUFFER = "Exact", "Buffer"
OUT_OF_CORE_ORDERS = (ORDER_EXACT, ORDER_BUFFER)
OUT_OF_CORE_ORDER_ENV = "DGL_OUT_OF_CORE_ORDER"  # dglrun -> its DGL processes (not the default)
# buffer order: each worker's features as this many physical partitions, and the buffer's
# size in them (dglrun sets it from the memory plan's page cache share)
BUFFER_PARTITIONS_ENV = "DGL_OUT_OF_CORE_PARTITIONS"
BUFFER_CAPACITY_ENV = "DGL_OUT_OF_CORE_CAPACITY"
BUFFER_PARTITIONS = 16


def buffer_holding(held: int, partitions: int = BUFFER_PARTITIONS) -> int:
    """Buffer order's buffer, in physical partitions, where the page cache holds ``held`` of
    them: one is kept for the next state's read; at least 1, and all of them when they all
    fit (one state, nothing to read ahead). dglrun sizes it from the memory plan's page cache
    share (launcher.plans.memory), a trainer without one from its free memory
    (outofcore.buffer)."""
    return partitions if held >= partitions else max(1, held - 1)


# spec.chunkedGraph.layout (the ParMETIS modes) as dglrun's --chunked-layout
SHARED = "Shared"  # every rank sees every chunk
PER_WORKER = "PerWorker"  # worker i holds only its own chunks (DistParMETIS)
CHUNKED_LAYOUTS = (SHARED, PER_WORKER)

# spec.partitionTransfer as dglrun's --partition-transfer
TRANSFER_HTTP = "http"  # each worker pulls its part from the partitioner pod
TRANSFER_KUBECTL = "kubectl"  # kubectl cp through the API server, via the launcher
TRANSFERS = (TRANSFER_HTTP, TRANSFER_KUBECTL)

# spec.elasticPolicy: the partitioner, made while the attempt's workers are being chosen (so
# that it holds its room), reads the attempt's partition count from status.elastic.members
STATUS_MEMBERS = "members"
# an elastic job's grow: the operator asks for it in status.elastic.growTo (the workers the
# next attempt may have); dglrun stops the trainers at the next epoch boundary (the next whole
# checkpoint) and exits with RESCALE_EXIT_CODE, which the operator reads as the rescale's start
STATUS_ELASTIC = "elastic"
STATUS_GROW_TO = "growTo"
RESCALE_EXIT_CODE = 75

# -- the init containers -------------------------------------------------------------------------

# kubectl-download: where to install kubectl, and what to download (else the image's own)
KUBECTL_TARGET_DIR_ENV = "TARGET_DIR"
KUBECTL_URL_ENV = "KUBECTL_URL"
KUBECTL_SHA256_ENV = "KUBECTL_SHA256"

# watcher-loop: wait until the pods a file lists are ready (or have finished)
WATCHER_FILE_ENV = "WATCHERFILE"
WATCHER_MODE_ENV = "WATCHERMODE"
WATCHER_NAMESPACE_ENV = "NAMESPACE"
WATCHER_EXPECTED_PODS_ENV = "WATCHER_EXPECTED_PODS"
WATCH_READY = "ready"  # Running and Ready
WATCH_FINISHED = "finished"  # Succeeded
# Running and Ready, or Succeeded: the partitioner over HTTP, which exits once every worker has
# its part (a launcher made again mid-training, to re-attach, finds it so)
WATCH_SERVED = "served"
# the launcher's init containers; KubectlCp: the partitioner copies the partitions into the
# launcher pod through WATCHER_PARTITIONER, which mounts the dataset volume at DATASET_DIR
WATCHER_PARTITIONER = "watcher-loop-partitioner"
WATCHER_WORKERS = "watcher-loop-worker"

# -- what dglrun tells the operator --------------------------------------------------------------

# The DGLJob's status fields that come from dglrun's report (podcontract/report.py: dglrun
# writes them to the ConfigMap ``<job>-report``; the operator validates them and copies them
# into the status, which no pod of the job can write)
STATUS_PROGRESS = "progress"  # for display: ``3/5 dispatch``, ``5/5 train: epoch 2/10``, ``done``
PROGRESS_DONE = "done"
STATUS_PARTITION_SECONDS = "partitionSeconds"
STATUS_DELIVERY_BYTES = "deliveryBytes"
STATUS_DELIVERY_SECONDS = "deliverySeconds"
STATUS_MEMORY = "memory"  # the memory plan and the peaks measured
STATUS_PARTITIONS = "partitions"  # the storage's cached partitions used
STATUS_RESUME = "resume"  # the checkpoint training resumed from
STATUS_PROGRESS_DETAIL = "progressDetail"  # step, epochs, percentage, ETAs, metrics (.progress)
DGLRUN_STATUS_FIELDS = (
    STATUS_PROGRESS,
    STATUS_PROGRESS_DETAIL,
    STATUS_PARTITION_SECONDS,
    STATUS_DELIVERY_BYTES,
    STATUS_DELIVERY_SECONDS,
    STATUS_MEMORY,
    STATUS_PARTITIONS,
    STATUS_RESUME,
)
# How dglrun's termination message starts when the job failed for memory
OOM_PREFIX = "OOMKilled: "  # a process was killed for memory (it names the process and pod)
MEMORY_PLAN_PREFIX = "memory plan: "  # a step will not fit the pods' memory limit
# A process of the job that refuses a file it was to load from the claim (a checkpoint or a model
# that could run code when loaded) exits with REFUSED_EXIT_CODE (sysexits' EX_DATAERR), its last
# line naming the file and why; dglrun's termination message then starts with REFUSED_PREFIX and
# quotes that line, and the operator fails the job at once: another attempt would refuse it again
REFUSED_EXIT_CODE = 65
REFUSED_PREFIX = "refused: "
