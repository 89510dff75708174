"""The console's GPU-hours against what Kubernetes says its pods ran: each pod's GPUs × the time its container ran.

Kubernetes keeps no accounting of its own: the figure is read from the pods the API has — a running pod's
container start until now, a finished one's start to finish. The pods a resize or a preemption deletes stay in the
API, ended, with their times, while their Job exists (the console's accounting finalizer, ``jobs.py``). A job
resized or preempted whose deleted pods are gone all the same (its Job made by a console without the finalizer) is
compared over what is left and marked ``partial``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.backends.kubernetes.client import Kube, KubernetesError, connect
from scheduler.backends.kubernetes.jobs import ACCOUNTING_FINALIZER, JOB_LABEL
from scheduler.backends.kubernetes.records import container_runs
from scheduler.models import Job, RescaleEvent, RescaleKind


@dataclass(frozen=True)
class PodRun:
    namespace: str
    console_id: int | None  # the console job it runs, when the console made it
    gpus: int
    started_at: datetime
    ended_at: datetime | None  # None: still running
    kept: bool = False  # it carries the console's accounting finalizer: deleted, it stays in the API


def pod_runs(pods: Iterable[Mapping[str, Any]]) -> list[PodRun]:
    """The pods that asked for GPUs and ran, with their first container's times."""
    runs = []
    for pod in pods:
        for gpus, started, ended in container_runs([pod]):
            metadata = pod.get("metadata") or {}
            label = str((metadata.get("labels") or {}).get(JOB_LABEL) or "")
            runs.append(PodRun(str(metadata.get("namespace") or ""), int(label) if label.isdigit() else None, gpus,
                               started, ended, ACCOUNTING_FINALIZER in (metadata.get("finalizers") or [])))
    return runs


def read_pod_runs(kube: Kube) -> list[PodRun]:
    return pod_runs(kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces))


@dataclass(frozen=True)
class JobAccount:
    console_id: int
    tenant: str
    console_gpu_seconds: float
    pod_gpu_seconds: float
    partial: bool  # pods a resize or preemption deleted are no longer in the API (its Job kept none)

    @property
    def difference(self) -> float:
        return self.console_gpu_seconds - self.pod_gpu_seconds


def reconcile(runs: Iterable[PodRun], now: datetime) -> list[JobAccount]:
    """Per console job whose pods the API has: the console's GPU-seconds beside its pods'."""
    seconds: dict[int, float] = defaultdict(float)
    kept: set[int] = set()
    for run in runs:
        if run.console_id is not None:
            seconds[run.console_id] += run.gpus * max(((run.ended_at or now) - run.started_at).total_seconds(), 0.0)
            kept |= {run.console_id} if run.kept else set()
    # A job resized or preempted had pods deleted: the API has them only where its pods carry the finalizer.
    lost = set(RescaleEvent.objects.filter(job_id__in=seconds, kind__in=[RescaleKind.RESCALE, RescaleKind.PREEMPT])
               .values_list("job_id", flat=True)) - kept
    jobs = Job.objects.select_related("tenant").in_bulk(list(seconds))
    return [JobAccount(pk, jobs[pk].tenant.name, jobs[pk].attained_gpu_seconds, seconds[pk], pk in lost)
            for pk in sorted(seconds) if pk in jobs]


def gpu_seconds_by_tenant(runs: Iterable[PodRun], start: datetime, end: datetime) -> dict[str, float]:
    """The pods' GPU-seconds in [start, end) per namespace, each run clipped to the period."""
    seconds: dict[str, float] = defaultdict(float)
    for run in runs:
        overlap = (min(end, run.ended_at or end) - max(start, run.started_at)).total_seconds()
        if overlap > 0:
            seconds[run.namespace] += run.gpus * overlap
    return dict(seconds)


def api_comparison(console_by_tenant: dict[str, float], start: datetime, end: datetime,
                   only: str | None = None) -> list[str]:
    """A report's words on its GPU-hours beside the pods' in the API for the same period, tenant by tenant."""
    try:
        pods = gpu_seconds_by_tenant(read_pod_runs(connect()), start, end)
    except KubernetesError as error:
        return [f"Kubernetes' pods could not be read for this period: {error}"]
    lines = []
    for tenant in sorted(set(console_by_tenant) | set(pods)):
        if only is not None and tenant != only:
            continue
        here, there = console_by_tenant.get(tenant, 0.0) / 3600, pods.get(tenant, 0.0) / 3600
        if max(here, there) < 0.005:
            continue
        gap = f"{(here - there) / there:+.1%}" if there else "no pods in the API"
        lines.append(f"{tenant} {here:.2f} here, {there:.2f} in its pods ({gap})")
    if not lines:
        return ["Kubernetes' pods show no GPU time in this period either."]
    return ["GPU-hours beside the pods Kubernetes still has (GPUs × their containers' running time) for the same "
            "period: " + "; ".join(lines) + ". Pods whose Job was deleted are no longer counted there."]
