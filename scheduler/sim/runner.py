"""One what-if scenario, start to finish: trace × cluster × policy × power settings → summary.

The single entry point shared by ``manage.py simulate``, the what-if Celery tasks and the
validation against published results. Pure: no Django; files are read from the paths given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.core.cycle import CycleConfig
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.policy import get_policy
from scheduler.core.types import NodeInfo, TenantInfo
from telemetry.power import DEFAULT_GRID_G_CO2_PER_KWH, DEFAULT_PRICE_PER_KWH, DEFAULT_PUE, PowerModel

from .engine import ProgressCallback, SimConfig, simulate
from .metrics import summarise
from .powerdown import PowerDownConfig
from .presets import ClusterPreset, NodeGroup, build_nodes, get_preset
from .profiles import artifact_jobs, artifact_profiles, load_grad_curves, load_measured_step_times
from .records import SimulationResult, WorkloadJob
from .trace_formats import load_trace


@dataclass(frozen=True)
class Scenario:
    """Everything that defines one what-if run; JSON-friendly so it can be stored and replayed."""

    trace: str  # path of the trace file
    policy: str = "pollux"
    format: str = "auto"
    elastic: bool | None = None  # None: elastic for elastic policies, rigid replay otherwise
    preset: str | None = None  # a cluster preset (presets.py), else nodes × gpus_per_node of gpu_type
    nodes: int = 16
    gpus_per_node: int = 4
    gpu_type: str = "t4"
    round_seconds: float = 60.0
    restart_seconds: float = 30.0
    charge_first_start: bool = False
    # Execute jobs with their measured profiles as the Pollux artifact's simulator does, instead of with the
    # fitted models the policies see: efficiency from the validation curves' gradient statistics by batch and
    # epoch (sim/grad_curves.py), step times from the measured placements (sim/step_times.py), and the artifact's
    # per-GPU batch limits (profiles.ARTIFACT_MAX_LOCAL_BSZ) and per-policy job pins (profiles.ARTIFACT_PINNED_JOBS:
    # ncf on one GPU at a fixed batch under pollux); read from traces_dir.
    measured_profiles: bool = False
    power_down_spares: int | None = None  # switch idle nodes off, keeping this many spare (None: never)
    power_on_seconds: float = 300.0
    min_off_seconds: float = 600.0
    power_cap_fraction: float = 1.0  # every GPU type's cap, as a fraction of its board power ...
    power_caps_by_type: Mapping[str, float] = field(default_factory=dict)  # ... unless its type has one here
    load_factor: float = 1.0  # 2.0 = the same jobs arriving twice as fast
    seed: int = 0
    max_jobs: int | None = None  # the first N jobs only
    policy_config: Mapping[str, Any] = field(default_factory=dict)
    # A mixed cluster (e.g. the live inventory): (gpu_type, gpus_per_node, nodes) groups, instead of preset or
    # nodes × gpus_per_node of gpu_type; and the tenants' quotas (GPUs guaranteed), which override a preset's.
    node_groups: Sequence[Sequence[Any]] = ()
    tenant_quotas: Mapping[str, int] = field(default_factory=dict)
    # What a kWh of GPU energy costs (telemetry.power.PowerModel): facility overhead, grid CO₂, price.
    pue: float = DEFAULT_PUE
    grid_g_co2_per_kwh: float = DEFAULT_GRID_G_CO2_PER_KWH
    price_per_kwh: float = DEFAULT_PRICE_PER_KWH

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("nodes and gpus_per_node must be ≥ 1")
        if self.load_factor <= 0:
            raise ValueError(f"load_factor must be > 0, got {self.load_factor}")

    def as_dict(self) -> dict[str, Any]:
        # Copies as plain JSON types; a malformed field is left as it is for validation to name.
        return {
            **dataclasses.asdict(self), "policy_config": _plain(self.policy_config),
            "node_groups": [list(group) for group in self.node_groups], "tenant_quotas": _plain(self.tenant_quotas),
            "power_caps_by_type": _plain(self.power_caps_by_type),
        }

    def power_model(self) -> PowerModel:
        """The default GPU power specs under this scenario's caps, PUE, grid intensity and price."""
        return PowerModel(cap_fraction=self.power_cap_fraction, type_caps=dict(self.power_caps_by_type), pue=self.pue,
                          grid_g_co2_per_kwh=self.grid_g_co2_per_kwh, price_per_kwh=self.price_per_kwh)


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def cluster_for(scenario: Scenario, traces_dir: Path) -> tuple[tuple[NodeInfo, ...], tuple[TenantInfo, ...]]:
    if scenario.node_groups:
        groups = (NodeGroup(str(kind), int(per_node), int(count)) for kind, per_node, count in scenario.node_groups)
        preset = ClusterPreset("custom", tuple(groups))
    elif scenario.preset:
        preset = get_preset(scenario.preset, traces_dir)
    else:
        preset = ClusterPreset("custom", (NodeGroup(scenario.gpu_type, scenario.gpus_per_node, scenario.nodes),))
    quotas = scenario.tenant_quotas or preset.tenant_quotas
    return build_nodes(preset), tuple(TenantInfo(name, quota) for name, quota in sorted(quotas.items()))


def workload_for(scenario: Scenario, elastic: bool) -> list[WorkloadJob]:
    jobs = load_trace(Path(scenario.trace), scenario.format, elastic=elastic, seed=scenario.seed)
    jobs = jobs[: scenario.max_jobs] if scenario.max_jobs else jobs
    if scenario.load_factor != 1.0:
        jobs = [dataclasses.replace(job, submit_time=job.submit_time / scenario.load_factor) for job in jobs]
    return jobs


def _power_down(scenario: Scenario) -> PowerDownConfig | None:
    if scenario.power_down_spares is None:
        return None
    return PowerDownConfig(scenario.power_down_spares, scenario.min_off_seconds, scenario.power_on_seconds)


def run_scenario(
    scenario: Scenario, traces_dir: Path, *, power: PowerModel | None = None,
    cycle: CycleConfig | None = None, on_progress: ProgressCallback | None = None,
) -> tuple[SimulationResult, dict[str, Any]]:
    """Simulate ``scenario``; returns the full result and its summary (``metrics.summarise``) as a dict."""
    policy = get_policy(scenario.policy, **scenario.policy_config)
    elastic = (not policy.event_driven) if scenario.elastic is None else scenario.elastic
    caps = scenario.power_cap_fraction, dict(scenario.power_caps_by_type)
    power = power.at_cap(*caps) if power else scenario.power_model()
    nodes, tenants = cluster_for(scenario, traces_dir)
    config = SimConfig(round_seconds=scenario.round_seconds, restart_seconds=scenario.restart_seconds,
                       speed_factor=power.throughput_factor, speed_factor_by_type=power.throughput_factors(),
                       cycle=cycle or CycleConfig(), charge_first_start=scenario.charge_first_start,
                       power_down=_power_down(scenario))
    curves = load_grad_curves(traces_dir) if scenario.measured_profiles else None
    step_times = load_measured_step_times(traces_dir) if scenario.measured_profiles else None
    profiles = artifact_profiles(FITTED_PROFILES) if scenario.measured_profiles else FITTED_PROFILES
    jobs = workload_for(scenario, elastic)
    jobs = artifact_jobs(jobs, scenario.policy) if scenario.measured_profiles else jobs
    result = simulate(jobs, nodes, policy, tenants=tenants, profiles=profiles,
                      config=config, on_progress=on_progress, grad_curves=curves, step_times=step_times)
    result = dataclasses.replace(result, power_cap_fraction=caps[0], power_caps_by_type=caps[1])
    return result, summarise(result, power).as_dict()
