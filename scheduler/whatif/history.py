"""This cluster's own history as a what-if: the workload, the cluster, and the (baseline, what-if) pair.

**Source.** Either the cluster's own recent history or a trace file under ``TRACES_DIR``. History becomes a trace in
our native format (``scheduler.sim.trace_formats.write_native``), written under ``VAR_DIR/whatif/`` with a name that
is the hash of its contents: the Celery worker reads it like any trace, a stored run can be replayed later
(``runs.rerun``), and the same history is written once. A file rather than an in-memory workload because a
``Scenario`` is stored as JSON and names its trace (``history:<file>``, see ``traces``). Each job submitted in the
last N days that started becomes one row: its tenant, GPU bounds, GPU type and batch; its profile when it is one the
simulator knows, with its total work (only the work it did if it failed or was cancelled); otherwise a rigid job
whose duration is its total work (seconds at ``min_gpus``, the live executor's unit for a job without a profile).

**Cluster.** ``live``: the inventory's nodes grouped by GPU type and size (``Scenario.node_groups``) and, for history,
the tenants' quotas; or a preset of ``scheduler.sim.presets``.

**Runs.** A sweep of two runs (``runs.create_sweep_of``, launched by ``runs.launch_sweep`` through Celery): the
**baseline** — the live policy, round and restart times, no power cap, no power-down, load 1 — and the **what-if**
with the chosen settings; both with the chosen PUE, grid intensity and price.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db.models import Min

from scheduler.core.config import policy_names
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.gpu_types import gpu_type_key
from scheduler.core.power import DEFAULT_SPECS
from scheduler.live.config import scheduler_settings
from scheduler.live.snapshot import build_snapshot
from scheduler.models import FINISHED_STATES, Gpu, Job, JobState, Tenant, WhatIfSweep
from scheduler.sim.presets import get_preset
from scheduler.sim.records import WorkloadJob
from scheduler.sim.runner import Scenario, ScenarioError
from scheduler.sim.trace_formats import write_native
from scheduler.sim.traces import TraceError

from . import runs
from .traces import display_name, history_dir, history_name

Viewer = User | AnonymousUser
HISTORY = "history"
LIVE_CLUSTER = "live"


@dataclass(frozen=True)
class Choices:
    """What the page's controls say."""

    source: str = HISTORY  # or a trace path relative to TRACES_DIR
    days: int = 7
    cluster: str = LIVE_CLUSTER  # or a preset name
    policy: str = "tiresias"
    power_caps: Mapping[str, float] = field(default_factory=dict)  # GPU type → cap fraction; absent: uncapped
    power_down_spares: int | None = None  # None: nodes are never switched off
    min_off_seconds: float = 600.0
    pue: float = 1.58
    grid_g_co2_per_kwh: float = 475.0
    price_per_kwh: float = 0.10
    load_factor: float = 1.0
    max_jobs: int | None = None


# --- the workload ----------------------------------------------------------------------------


def history_workload(since: datetime, now: datetime) -> list[WorkloadJob]:
    """The jobs submitted in [since, now) that started, as simulator jobs (module docstring), in submission order."""
    jobs = list(Job.objects.filter(submitted_at__gte=since, submitted_at__lt=now, started_at__isnull=False)
                .select_related("tenant").order_by("submitted_at", "id"))
    origin = jobs[0].submitted_at if jobs else now
    workload = (_workload_job(job, origin) for job in jobs)
    return [job for job in workload if job.total_work > 0]


def _workload_job(job: Job, origin: datetime) -> WorkloadJob:
    gave_up = job.state in FINISHED_STATES and job.state != JobState.SUCCEEDED
    return WorkloadJob(
        id=str(job.pk), submit_time=(job.submitted_at - origin).total_seconds(), tenant=job.tenant.name,
        min_gpus=job.min_gpus, max_gpus=job.max_gpus, total_work=job.progress if gave_up else job.total_work,
        profile=job.workload_profile if job.workload_profile in FITTED_PROFILES else None,
        batch_size=job.batch_size, gpu_type=job.gpu_type or None,
    )


def write_history_trace(jobs: Iterable[WorkloadJob], directory: Path) -> Path:
    """Write ``jobs`` as a native trace named by the hash of its contents under ``directory``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(suffix=".csv", dir=directory)
    os.close(handle)
    write_native(Path(temporary), jobs)
    digest = hashlib.sha256(Path(temporary).read_bytes()).hexdigest()[:16]
    path = directory / f"history-{digest}.csv"
    os.replace(temporary, path)
    return path


# --- the cluster -----------------------------------------------------------------------------


def live_node_groups(now: datetime) -> list[list[Any]]:
    """The inventory as ``Scenario.node_groups``: [gpu_type, gpus_per_node, nodes], largest groups first."""
    sizes = Counter((node.gpu_type, len(node.gpus)) for node in build_snapshot(now).snap.nodes if node.gpus)
    return [[kind, per_node, count] for (kind, per_node), count in
            sorted(sizes.items(), key=lambda item: (-item[0][1] * item[1], item[0]))]


def cluster_gpu_types(cluster: str, now: datetime) -> list[str]:
    """The GPU types of the chosen cluster (the inventory or a preset); none for a preset whose files are missing."""
    if cluster == LIVE_CLUSTER:  # a cheap query: the page asks on every slider move
        models = Gpu.objects.values_list("model", flat=True).distinct()
        return sorted({gpu_type_key(model) for model in models} & set(DEFAULT_SPECS))
    try:
        return sorted(get_preset(cluster, Path(settings.TRACES_DIR)).gpus_by_type)
    except (ValueError, OSError, TraceError):
        return []


def scenario_caps(caps: Mapping[str, float], gpu_types: Iterable[str]) -> dict[str, Any]:
    """The ``Scenario`` fields for per-type ``caps`` on a cluster of ``gpu_types``: one all-types fraction when every
    type has the same cap (uncapped types count as 1.0), a cap per type otherwise."""
    present = {gpu_type: float(caps.get(gpu_type, 1.0)) for gpu_type in gpu_types}
    if len(set(present.values())) <= 1:
        return {"power_cap_fraction": next(iter(present.values()), 1.0), "power_caps_by_type": {}}
    return {"power_cap_fraction": 1.0, "power_caps_by_type": present}


def scenarios_for(choices: Choices, now: datetime) -> tuple[Scenario, Scenario]:
    """(baseline, what-if) for the choices; ``ValidationError`` naming a bad field, ``ValueError`` for a history
    without jobs or an empty inventory."""
    try:
        return _scenarios_for(choices, now)
    except ScenarioError as error:
        raise ValidationError(error.errors) from None


def _scenarios_for(choices: Choices, now: datetime) -> tuple[Scenario, Scenario]:
    live = scheduler_settings()
    if choices.source == HISTORY:
        workload = history_workload(now - timedelta(days=choices.days), now)
        if not workload:
            raise ValueError(f"No job submitted in the last {choices.days} days has started: nothing to replay.")
        trace, quotas = history_name(write_history_trace(workload, history_dir())), _quotas()
    else:
        trace, quotas = choices.source, {}
    cluster: dict[str, Any] = {"preset": choices.cluster}
    if choices.cluster == LIVE_CLUSTER:
        groups = live_node_groups(now)
        if not groups:
            raise ValueError("The inventory has no GPUs yet: choose a preset cluster.")
        cluster = {"node_groups": groups, "tenant_quotas": quotas}
    gpu_types = {kind for kind, _, _ in cluster["node_groups"]} if "node_groups" in cluster else (
        cluster_gpu_types(choices.cluster, now))
    caps = scenario_caps(choices.power_caps, gpu_types)
    baseline = Scenario(
        trace=trace, policy=live.policy, round_seconds=float(live.round_seconds),
        restart_seconds=float(live.restart_seconds), max_jobs=choices.max_jobs, pue=choices.pue,
        grid_g_co2_per_kwh=choices.grid_g_co2_per_kwh, price_per_kwh=choices.price_per_kwh, **cluster,
    )
    scenario = dataclasses.replace(
        baseline, policy=choices.policy, **caps, power_down_spares=choices.power_down_spares,
        min_off_seconds=choices.min_off_seconds, load_factor=choices.load_factor,
    )
    return baseline, scenario


def _quotas() -> dict[str, int]:
    return dict(Tenant.objects.values_list("name", "gpu_quota"))


def start_whatif(user: Viewer, choices: Choices, now: datetime) -> WhatIfSweep:
    """Create and launch the sweep (baseline, what-if); ``ValidationError``/``ValueError`` say what is wrong."""
    baseline, scenario = scenarios_for(choices, now)
    sweep = runs.create_sweep_of([baseline, scenario], user, name=sweep_name(choices, baseline, scenario, now))
    runs.launch_sweep(sweep)
    return sweep


def history_span(now: datetime) -> timedelta | None:
    """How far back this cluster's history of started jobs goes from ``now``; None without any."""
    first = Job.objects.filter(started_at__isnull=False, submitted_at__lt=now).aggregate(at=Min("submitted_at"))["at"]
    return now - first if first is not None else None


def span_text(span: timedelta) -> str:
    """"20 min", "5.5 h", "9.0 d"."""
    minutes = max(1, round(span.total_seconds() / 60))
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes / 60:.1f} h" if minutes < 2880 else f"{minutes / 1440:.1f} d"


def history_label(days: int, span: timedelta | None) -> str:
    """"last 7 d", or what there is when the history is shorter: "all 20 min of history"."""
    if span is None or span >= timedelta(days=days):
        return f"last {days} d"
    return f"all {span_text(span)} of history"


def sweep_name(choices: Choices, baseline: Scenario, what_if: Scenario, now: datetime | None = None) -> str:
    span = history_span(now) if now is not None else None
    source = history_label(choices.days, span) if choices.source == HISTORY else display_name(choices.source)
    parts = [choices.policy, runs.caps_label(what_if.as_dict())]
    if choices.power_down_spares is not None:
        parts.append(f"power-down ({choices.power_down_spares} spare)")
    if choices.load_factor != 1:
        parts.append(f"load ×{choices.load_factor:g}")
    return f"{source}: {', '.join(parts)} vs {baseline.policy}"


def policy_options() -> list[str]:
    return policy_names()
