"""One what-if scenario, start to finish: trace × cluster × policy × power settings → summary.

The single entry point shared by ``manage.py simulate``, the what-if Celery tasks and the
validation against published results. Pure: no Django; files are read from the paths given.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from scheduler.core.config import SchedulingConfig, build_policy, policy_class
from scheduler.core.cycle import CycleConfig
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.policies.sia import RESTART_SECONDS as SIA_POLICY_RESTART_SECONDS
from scheduler.core.policies.sia import SiaPolicy
from scheduler.core.policy import Policy
from scheduler.core.power import PowerModel
from scheduler.core.types import NodeInfo, TenantInfo

from .backtest import BacktestResult, backtest
from .config import SimConfig
from .engine import ProgressCallback, simulate
from .metrics import summarise
from .powerdown import PowerDownConfig
from .presets import ClusterPreset, NodeGroup, build_nodes, get_preset
from .profiles import (
    SIA_DEFAULT_RESTART_SECONDS,
    SIA_RESTART_SECONDS,
    SIA_SLOWDOWN,
    artifact_jobs,
    artifact_profiles,
    load_grad_curves,
    load_measured_step_times,
)
from .records import SimulationResult, WorkloadJob
from .runtimes import estimator_for
from .scenario import Scenario, ScenarioError
from .trace_formats import load_trace

__all__ = ["Scenario", "ScenarioError", "backtest_scenario", "cluster_for", "run_scenario", "workload_for"]


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
    scheduling = scheduling_config(scenario, cycle)
    policy = build_policy(scheduling)
    elastic = (not policy.event_driven) if scenario.elastic is None else scenario.elastic
    caps = scenario.power_cap_fraction, dict(scenario.power_caps_by_type)
    power = power.at_cap(*caps) if power else scenario.power_model()
    nodes, tenants = cluster_for(scenario, traces_dir)
    execution = {"speed_factor": power.throughput_factor, "speed_factor_by_type": power.throughput_factors(),
                 "power_down": _power_down(scenario), "charge_first_start": scenario.charge_first_start}
    config = SimConfig.of(scheduling, **(execution | _artifact_execution(scenario)))
    curves = load_grad_curves(traces_dir) if scenario.measured_profiles else None
    step_times = load_measured_step_times(traces_dir) if scenario.measured_profiles else None
    profiles = artifact_profiles(FITTED_PROFILES) if scenario.measured_profiles else FITTED_PROFILES
    jobs = workload_for(scenario, elastic)
    jobs = artifact_jobs(jobs, scenario.policy) if scenario.measured_profiles else jobs
    result = simulate(jobs, nodes, policy, tenants=tenants, profiles=profiles, config=config,
                      on_progress=on_progress, grad_curves=curves, step_times=step_times,
                      estimator=estimator_for(policy))
    result = dataclasses.replace(result, power_cap_fraction=caps[0], power_caps_by_type=caps[1])
    return result, summarise(result, power).as_dict()


def scheduling_config(scenario: Scenario, cycle: CycleConfig | None = None) -> SchedulingConfig:
    """The scheduling configuration ``scenario`` runs under (the simulator never reads a reason, so by default its
    rounds do not explain counts)."""
    config = SchedulingConfig(
        policy=scenario.policy, policy_config=dict(scenario.policy_config), round_seconds=scenario.round_seconds,
        restart_seconds=scenario.restart_seconds, cycle=cycle or CycleConfig(explain_counts=False),
    )
    return _as_the_artifact(scenario, config)


# The policies each artifact's authors ran, which a reproduction runs as they did: without this product's calm
# guards (payback and settling, cycle.Guards) and its starts between rounds (admission.py), which their simulators do
# not have (a job waits for the next round there). Ours keep them.
REPRODUCED = {"pollux": frozenset({"pollux", "tiresias", "optimus"}),
              "sia": frozenset({"sia", "pollux-unaware", "gavel"})}


def _as_the_artifact(scenario: Scenario, config: SchedulingConfig) -> SchedulingConfig:
    """The one seam of validation-only scheduling settings: a reproduced policy runs without the calm guards;
    Sia's simulator charges its own restart delays by model, and its policy prices another table of them
    (policies/sia.py, ``RESTART_SECONDS``): the reproduced ``sia`` prices that table, ours price the delays charged,
    as on a live cluster."""
    if not scenario.measured_profiles:
        return config
    reproduced = scenario.policy in REPRODUCED.get(scenario.artifact, ())
    if reproduced:
        config = dataclasses.replace(config, cycle=dataclasses.replace(config.cycle, payback_seconds=0.0,
                                                                          settle_seconds=0.0,
                                                                          start_between_rounds=False))
    if scenario.artifact != "sia":
        return config
    policy_config = dict(config.policy_config)
    if reproduced and issubclass(policy_class(scenario.policy), SiaPolicy):
        policy_config.setdefault("restart_seconds_by_profile", dict(SIA_POLICY_RESTART_SECONDS))
    return dataclasses.replace(config, policy_config=policy_config, restart_seconds=SIA_DEFAULT_RESTART_SECONDS,
                               restart_seconds_by_profile=SIA_RESTART_SECONDS)


def _artifact_execution(scenario: Scenario) -> dict[str, Any]:
    """The simulator settings of the artifact ``measured_profiles`` reproduces, beyond its profiles and delays."""
    if not (scenario.measured_profiles and scenario.artifact == "sia"):
        return {}
    return {"slowdown_by_profile": SIA_SLOWDOWN, "charge_first_start": True}


def backtest_scenario(scenario: Scenario, traces_dir: Path, every: float = 3600.0) -> BacktestResult:
    """The forecast backtest (sim/backtest.py) of ``scenario``'s trace, cluster, policy and round settings."""
    scheduling = scheduling_config(scenario)
    policy = build_policy(scheduling)
    elastic = (not policy.event_driven) if scenario.elastic is None else scenario.elastic
    nodes, tenants = cluster_for(scenario, traces_dir)
    config = SimConfig.of(scheduling, **({"charge_first_start": scenario.charge_first_start}
                                         | _artifact_execution(scenario)))
    jobs, profiles, execution = workload_for(scenario, elastic), FITTED_PROFILES, {}
    if scenario.measured_profiles:  # jobs run as the artifact measured them; forecasts know the fitted models
        jobs, profiles = artifact_jobs(jobs, scenario.policy), artifact_profiles(FITTED_PROFILES)
        execution = {"grad_curves": load_grad_curves(traces_dir), "step_times": load_measured_step_times(traces_dir)}
    def fresh_policy() -> Policy:  # each replay and forecast gets its own instance, as each round would
        return build_policy(scheduling)

    return backtest(jobs, nodes, fresh_policy, tenants=tenants, profiles=profiles, config=config, every=every,
                    execution=execution)
