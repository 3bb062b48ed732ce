"""The operator's settings that shape a job's children (its CLI flags, controller/main.py), as
one frozen value every builder is handed."""

from __future__ import annotations

from dataclasses import dataclass

# Gang scheduling (--gang-scheduling): the scheduler that places a job's pods all or none
GANG_NONE = "none"
# scheduler-plugins' Coscheduling: a PodGroup per job, its pods labelled with the group's name
GANG_SCHEDULER_PLUGINS = "scheduler-plugins"
GANG_SCHEDULERS = (GANG_NONE, GANG_SCHEDULER_PLUGINS)
# the schedulerName of scheduler-plugins' scheduler installed as a second scheduler
DEFAULT_GANG_SCHEDULER_NAME = "scheduler-plugins-scheduler"


@dataclass(frozen=True)
class BuildOptions:
    """Operator-level settings that shape the children (from the CLI flags)."""

    kubectl_download_image: str = "dgloperator/kubectl-download:0.2.0"
    watcher_loop_image: str = "dgloperator/watcher-loop:0.2.0"
    init_image_pull_policy: str = "IfNotPresent"
    kubectl_download_url: str = ""
    kubectl_download_sha256: str = ""
    gang_scheduling: str = GANG_NONE
    gang_scheduler_name: str = DEFAULT_GANG_SCHEDULER_NAME
    # --kueue: a job labelled kueue.x-k8s.io/queue-name runs only once Kueue admits its
    # Workload (controller/features/kueue.py)
    kueue: bool = False
    # --kueue-manage-jobs-without-queue-name (Kueue's manageJobsWithoutQueueName): with
    # --kueue, a job without the label and no LocalQueue named default to take it waits,
    # without pods, instead of running outside Kueue
    kueue_manage_jobs_without_queue_name: bool = False
    # --network-policy (the chart's networkPolicy.enabled): each job gets network_policy()
    network_policy: bool = True
    # --operator-service-account NAMESPACE/NAME (the chart's: the operator's own account): a
    # job in that namespace whose template names it is refused (controller/lifecycle/invalid.py)
    operator_service_account: str = ""

    def __post_init__(self) -> None:
        if self.gang_scheduling not in GANG_SCHEDULERS:
            raise ValueError(
                f"gang scheduling {self.gang_scheduling!r}: not one of {', '.join(GANG_SCHEDULERS)}"
            )

    @property
    def gang(self) -> bool:
        """Pods are placed by a gang scheduler, through a PodGroup per job."""
        return self.gang_scheduling != GANG_NONE
