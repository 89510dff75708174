"""Prometheus export: each GPU's latest sample under DCGM-exporter names, and the cluster's queue and fairness.

GPU metrics keep dcgm-exporter's names, units and labels (``gpu``, ``UUID``, ``device``,
``modelName``, ``Hostname``), so its Grafana dashboards work unchanged; a ``simulated``
label ("true"/"false") flags samples derived from allocations rather than measured. A
metric the GPU did not report (NULL) is left out, never exported as 0, and a GPU whose
latest sample is older than ``STALE_AFTER`` is not exported at all. dcgm-exporter declares
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` a counter; it is a gauge here because the Python
client would rename a counter to ``…_total`` (``rate()`` works on either).

Cluster metrics (``cluster_ops_*``) are computed from the scheduler's rows at scrape time, among them what the
alerting rules (``monitoring/prometheus/cluster-ops-rules.yml``) need: GPUs per health, the oldest wait, each
tenant's quota and queue, the last successful round and each worker's last heartbeat (Unix seconds), and the
intervals they are expected at.
A collector is built per request and registered in a fresh ``CollectorRegistry``: no state
survives between scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cluster_ops.models import Heartbeat
from scheduler.live.config import live_settings
from scheduler.models import (
    QUEUED_STATES,
    SCHEDULABLE_STATES,
    Gpu,
    GpuHealth,
    Job,
    RoundStatus,
    SchedulerSettings,
    SchedulingRound,
    Tenant,
)
from scheduler.sim.metrics import entitlements, jain_index, percentile

from .models import GpuSample, TelemetrySource
from .queries import gpus_held_by_tenant
from .storage import latest_per_gpu

STALE_AFTER = timedelta(minutes=5)
GPU_LABELS = ["gpu", "UUID", "device", "modelName", "Hostname", "simulated"]
# name, GpuSample field, help (dcgm-exporter's), factor from our unit to DCGM's
GPU_METRICS = [
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_util", "GPU utilization (in %).", 1),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_util", "Memory utilization (in %).", 1),
    ("DCGM_FI_DEV_FB_USED", "mem_used_mib", "Framebuffer memory used (in MiB).", 1),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (in W).", 1),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_j", "Total energy consumption since boot (in mJ).", 1000),
    ("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "GPU temperature (in C).", 1),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "SM clock frequency (in MHz).", 1),
]
WAIT_QUANTILES = (0.5, 0.9, 0.99)


def render(now: datetime) -> bytes:
    """The Prometheus text exposition at ``now``, from a fresh registry."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(now))
    return generate_latest(registry)


class ClusterCollector(Collector):
    """Collects at ``now``; the view builds one per scrape."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        samples = latest_samples(self.now)
        yield from gpu_metrics(samples)
        yield from queue_metrics(self.now)
        yield from tenant_metrics(tenant_shares())
        yield from tenant_demand_metrics()
        yield from inventory_metrics()
        yield from liveness_metrics()
        yield from source_metrics()
        idle = GaugeMetricFamily(
            "cluster_ops_idle_allocated_gpus",
            f"GPUs held by a job whose latest utilisation is below {settings.TELEMETRY_IDLE_UTIL} %.",
        )
        idle.add_metric([], sum(1 for s in samples if _idle_allocated(s)))
        yield idle


def source_metrics() -> Iterator[Metric]:
    """How the configured pulled telemetry source (Prometheus) last went."""
    up = GaugeMetricFamily("cluster_ops_telemetry_source_up",
                           "1 if the last pass over the telemetry source succeeded.", labels=["source"])
    stale = GaugeMetricFamily("cluster_ops_telemetry_stale_nodes",
                              "Nodes with no recent sample in the telemetry source.", labels=["source"])
    unmatched = GaugeMetricFamily("cluster_ops_telemetry_unmatched_series",
                                  "GPUs in the telemetry source matching no GPU of the inventory.", labels=["source"])
    for row in TelemetrySource.objects.filter(source=settings.TELEMETRY_SOURCE):
        up.add_metric([row.source], 1.0 if row.ok else 0.0)
        stale.add_metric([row.source], float(len(row.stale)))
        unmatched.add_metric([row.source], float(len(row.unmatched)))
    yield from (up, stale, unmatched)


def latest_samples(now: datetime) -> list[GpuSample]:
    """Each GPU's latest sample, if taken within ``STALE_AFTER`` before ``now``."""
    return list(latest_per_gpu(now - STALE_AFTER, now + timedelta(microseconds=1)).select_related("gpu__node"))


def gpu_metrics(samples: list[GpuSample]) -> Iterator[Metric]:
    for name, field, documentation, factor in GPU_METRICS:
        family = GaugeMetricFamily(name, documentation, labels=GPU_LABELS)
        for sample in samples:
            value = getattr(sample, field)
            if value is not None:
                family.add_metric(_labels(sample), value * factor)
        yield family


def _labels(sample: GpuSample) -> list[str]:
    gpu = sample.gpu
    return [str(gpu.index), gpu.uuid, f"nvidia{gpu.index}", gpu.model, gpu.node.hostname,
            "true" if sample.simulated else "false"]


def _idle_allocated(sample: GpuSample) -> bool:
    return sample.job_id is not None and sample.gpu_util is not None and sample.gpu_util < settings.TELEMETRY_IDLE_UTIL


def queue_metrics(now: datetime) -> Iterator[Metric]:
    """Jobs waiting for GPUs (pending or preempted) and how long they have waited since submission."""
    submitted = list(Job.objects.filter(state__in=QUEUED_STATES).values_list("submitted_at", flat=True))
    length = GaugeMetricFamily("cluster_ops_queue_length", "Jobs waiting for GPUs (pending or preempted).")
    length.add_metric([], len(submitted))
    yield length
    waits = [(now - at).total_seconds() for at in submitted]
    wait = GaugeMetricFamily("cluster_ops_queue_wait_seconds", "Wait since submission of the queued jobs, percentiles.",
                             labels=["quantile"])
    for q in WAIT_QUANTILES if waits else ():
        wait.add_metric([str(q)], percentile(waits, q * 100) or 0.0)
    yield wait
    oldest = GaugeMetricFamily("cluster_ops_queue_oldest_wait_seconds",
                               "Wait since submission of the longest-waiting queued job (0 with none queued).")
    oldest.add_metric([], max(waits, default=0.0))
    yield oldest


@dataclass(frozen=True)
class Shares:
    """GPUs held per tenant now, and the entitlements of the tenants with jobs running or queued.

    Fairness counts only those tenants (as the simulator's ``tenant_fairness`` does): a tenant
    that asks for nothing is not short-changed.
    """

    total_gpus: int
    held: dict[str, int]  # every tenant
    entitled: dict[str, float]

    def share(self, tenant: str) -> float:
        return self.held.get(tenant, 0) / self.total_gpus if self.total_gpus else 0.0

    def jain(self) -> float | None:
        """Jain's index over share ÷ entitlement; None when nobody wants GPUs or there are none."""
        ratios = [self.share(tenant) / entitled for tenant, entitled in self.entitled.items()]
        return jain_index(ratios) if self.total_gpus else None


def tenant_shares() -> Shares:
    held = gpus_held_by_tenant()
    quotas = dict(Tenant.objects.values_list("name", "gpu_quota"))
    wanting = set(Job.objects.filter(state__in=SCHEDULABLE_STATES).values_list("tenant__name", flat=True))
    entitled = entitlements(wanting, quotas) if wanting else {}
    return Shares(Gpu.objects.count(), {name: held.get(name, 0) for name in sorted(quotas)}, entitled)


def tenant_metrics(shares: Shares) -> Iterator[Metric]:
    """GPUs held per tenant, their share of the cluster, entitlement, and Jain's index of share ÷ entitlement."""
    allocated = GaugeMetricFamily("cluster_ops_tenant_allocated_gpus", "GPUs held by the tenant's jobs.",
                                  labels=["tenant"])
    share = GaugeMetricFamily("cluster_ops_tenant_share", "The tenant's GPUs ÷ the cluster's GPUs.", labels=["tenant"])
    entitlement = GaugeMetricFamily("cluster_ops_tenant_entitlement",
                                    "The tenant's quota ÷ the quotas of tenants with jobs.", labels=["tenant"])
    for name, gpus in shares.held.items():
        allocated.add_metric([name], gpus)
        share.add_metric([name], shares.share(name))
    for name, entitled in shares.entitled.items():
        entitlement.add_metric([name], entitled)
    jain = GaugeMetricFamily("cluster_ops_fairness_jain",
                             "Jain's index over tenants with jobs of share ÷ entitlement (1 = fair).")
    index = shares.jain()
    if index is not None:
        jain.add_metric([], index)
    yield from (allocated, share, entitlement, jain)


def tenant_demand_metrics() -> Iterator[Metric]:
    """Each tenant's quota and queued jobs: with ``cluster_ops_tenant_allocated_gpus``, who is starved below quota."""
    quota = GaugeMetricFamily("cluster_ops_tenant_quota_gpus", "The tenant's GPU quota.", labels=["tenant"])
    queued = GaugeMetricFamily("cluster_ops_tenant_queued_jobs", "The tenant's jobs waiting for GPUs.",
                               labels=["tenant"])
    waiting = dict(Job.objects.filter(state__in=QUEUED_STATES).values_list("tenant__name").annotate(n=Count("id")))
    for name, gpus in Tenant.objects.order_by("name").values_list("name", "gpu_quota"):
        quota.add_metric([name], gpus)
        queued.add_metric([name], waiting.get(name, 0))
    yield from (quota, queued)


def inventory_metrics() -> Iterator[Metric]:
    """GPUs in the inventory by health (every health exported, 0 included, so an alert can compare)."""
    gpus = GaugeMetricFamily("cluster_ops_gpus", "GPUs in the inventory, by health.", labels=["health"])
    counts = dict(Gpu.objects.values_list("health").annotate(n=Count("id")))
    for health in GpuHealth.values:
        gpus.add_metric([health], counts.get(health, 0))
    yield gpus


def liveness_metrics() -> Iterator[Metric]:
    """When the scheduler last finished a round and each worker last beat, with the intervals they should keep."""
    stored = SchedulerSettings.objects.filter(pk=1).first()
    interval = GaugeMetricFamily("cluster_ops_round_interval_seconds", "The live scheduler's round interval.")
    paused = GaugeMetricFamily("cluster_ops_scheduler_paused", "1 while an operator has paused scheduling rounds.")
    refused = GaugeMetricFamily("cluster_ops_scheduler_setting_refused",
                                "1 for a stored scheduler setting that breaks its rule: rounds run on its last valid "
                                "value until it is corrected.", labels=["setting"])
    if stored is not None:
        live, problems = live_settings(stored)
        interval.add_metric([], live.round_seconds)
        paused.add_metric([], 1.0 if live.paused else 0.0)
        for name in sorted(problems):
            refused.add_metric([name], 1.0)
    last_round = GaugeMetricFamily("cluster_ops_last_round_timestamp_seconds",
                                   "When the last successful scheduling round finished (Unix time).")
    # Starts between rounds are not rounds: a stream of submissions must not hide rounds that stopped.
    rounds = SchedulingRound.objects.rounds_only().filter(status=RoundStatus.OK)
    finished = rounds.aggregate(at=Max("finished_at"))["at"]
    if finished is not None:
        last_round.add_metric([], finished.timestamp())
    heartbeat = GaugeMetricFamily("cluster_ops_worker_heartbeat_timestamp_seconds",
                                  "When the worker last ran the heartbeat task (Unix time).", labels=["worker"])
    for worker, seen in Heartbeat.objects.order_by("worker").values_list("worker", "last_seen_at"):
        heartbeat.add_metric([worker], seen.timestamp())
    heartbeat_interval = GaugeMetricFamily("cluster_ops_heartbeat_interval_seconds",
                                           "How often beat sends the heartbeat task.")
    heartbeat_interval.add_metric([], settings.HEARTBEAT_SECONDS)
    yield from (interval, paused, refused, last_round, heartbeat, heartbeat_interval)
