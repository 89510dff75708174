"""Kubernetes schedules, the console watches: every Job and pod with GPUs mirrored into the console's rows.

Nothing is ever sent to Kubernetes but reads. Each round the Nodes become the inventory (a node NotReady, cordoned
or tainted NoExecute has its GPUs lost), and each ``batch/v1`` Job whose pods ask for ``nvidia.com/gpu`` — and each
such pod no Job owns — becomes or updates one console ``Job`` (``mirror_jobs``): its namespace as the tenant, its
state, why it waits (suspended, Kueue's reason, the scheduler's condition on its pods, a container that cannot
start, the newest Warning event on it or its pods), its nodes and GPUs, its
start and end. A Job gone from the API while the console had it waiting or running is ended as cancelled, and the
round says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.db import transaction

from scheduler.backends import register_backend
from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.kubernetes.accounting import api_comparison
from scheduler.backends.kubernetes.client import Kube, KubernetesRefused, connect
from scheduler.backends.kubernetes.records import (
    Workload,
    add_warnings,
    node_record,
    observed,
    waits_unsuspended,
    warnings_by_object,
    workloads,
)
from scheduler.backends.mirror import ObservedJob, mirror_jobs
from scheduler.core.types import ClusterSnapshot
from scheduler.models import Allocation, Job, JobState

KUEUE = ("kueue.x-k8s.io", ("v1beta2", "v1beta1"), "workloads")  # Kueue's Workload, newest version first


def read_workloads(kube: Kube, now: datetime) -> list[ObservedJob]:
    """Every Job and lone pod with GPUs, as the API has them now."""
    jobs = kube.list_all("list", "jobs", kube.batch.list_job_for_all_namespaces)
    pods = kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces)
    found = workloads(list(jobs), pods)
    _add_admission(kube, found)
    if any(waits_unsuspended(workload) for workload in found):  # most rounds: nothing waits, no events read
        add_warnings(found, warnings_by_object(kube.list_all(
            "list", "events", kube.core.list_event_for_all_namespaces, field_selector="type=Warning")))
    return [observed(workload, now) for workload in found]


def _add_admission(kube: Kube, found: list[Workload]) -> None:
    """Kueue's reason on each Job it holds, where Kueue is installed (its API absent: nothing to add)."""
    group, versions, plural = KUEUE
    for version in versions:
        try:
            listed = list(kube.list_all("list", f"{plural}.{group}", kube.custom.list_cluster_custom_object,
                                        group, version, plural))
        except KubernetesRefused as refused:
            if refused.status == 404:
                continue
            raise
        by_owner = {str(reference.get("uid")): _admission(workload) for workload in listed
                    for reference in (workload.get("metadata") or {}).get("ownerReferences") or []}
        for item in found:
            item.admission = by_owner.get(str((item.raw.get("metadata") or {}).get("uid")), "")
        return


def _admission(workload: Mapping[str, Any]) -> str:
    """Why Kueue has not admitted a workload ("" once admitted)."""
    conditions = {condition.get("type"): condition for condition in (workload.get("status") or {}).get(
        "conditions") or []}
    if (conditions.get("Admitted") or {}).get("status") == "True":
        return ""
    waiting = conditions.get("QuotaReserved") or conditions.get("Admitted") or {}
    return " ".join(f"Kueue: {waiting.get('message') or waiting.get('reason') or 'not admitted'}".split())[:300]


@dataclass
class KubernetesObserver:
    """The round's executor when Kubernetes decides (``SchedulerSettings.executor == "kubernetes-observer"``)."""

    name: ClassVar[str] = "kubernetes-observer"
    decides: ClassVar[bool] = False
    kube: Kube | None = None  # None: connect in ``refresh_inventory``
    notes: list[str] = field(default_factory=list)
    measured_restarts: list[float] = field(default_factory=list)
    seen: list[ObservedJob] = field(default_factory=list)

    def refresh_inventory(self, now: datetime) -> None:
        """Nodes and workloads as the API has them now (both read before anything is written)."""
        self.kube = self.kube or connect()
        nodes = [node_record(raw) for raw in self.kube.list_all("list", "nodes", self.kube.core.list_node)]
        self.seen = [job for job in read_workloads(self.kube, now) if job.key]
        self.notes += sync_inventory("k8s", [node for node in nodes if node.gpus > 0 and node.name]).notes()

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        with transaction.atomic():
            mirrored = mirror_jobs(self.seen, now)
            self._end_deleted(now)
        self.notes.append(f"observing Kubernetes: {mirrored} Jobs and pods with GPUs mirrored")
        return snap  # as read before the mirror: no policy runs on it

    def _end_deleted(self, now: datetime) -> None:
        """Mirrored jobs still waiting or running here that the API no longer has: deleted behind the console's
        back. They end as cancelled, and the round says which."""
        listed = {job.key for job in self.seen}
        active = Job.objects.select_for_update().filter(state__in=[JobState.PENDING, JobState.RUNNING]).exclude(
            cluster_job_id="")
        gone = [job for job in active.only("pk", "name", "cluster_job_id") if job.cluster_job_id not in listed]
        if not gone:
            return
        Job.objects.filter(pk__in=[job.pk for job in gone]).update(
            state=JobState.CANCELLED, finished_at=now, pending_reason="", error="deleted from Kubernetes")
        Allocation.objects.filter(job__in=gone, ended_at__isnull=True).update(ended_at=now)
        names = ", ".join(job.name for job in gone[:10]) + (f" and {len(gone) - 10} more" if len(gone) > 10 else "")
        self.notes.append(f"{len(gone)} mirrored jobs deleted from Kubernetes: {names}")

    def launch(self, launches: object, now: datetime) -> None:
        """An observer launches nothing."""


register_backend("kubernetes-observer", lambda config: KubernetesObserver(),
                 label="Kubernetes observer (Kubernetes schedules, the console watches)",
                 compare_accounting=api_comparison)
