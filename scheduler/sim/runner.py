"""One what-if scenario, start to finish: trace × cluster × policy × power settings → summary.

The single entry point shared by ``manage.py simulate``, the what-if Celery tasks and the
validation against published results. Pure: no Django; files are read from the paths given.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from scheduler.core.config import SchedulingConfig, build_policy
from scheduler.core.cycle import CycleConfig
from scheduler.core.policy import Policy
from scheduler.core.power import PowerModel
from scheduler.core.types import NodeInfo, TenantInfo

from . import reproduction
from .backtest import BacktestResult, backtest
from .config import SimConfig
from .engine import ProgressCallback, simulate
from .metrics import summarise
from .powerdown import PowerDownConfig
from .presets import ClusterPreset, NodeGroup, build_nodes, get_preset
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
    config = SimConfig.of(scheduling, **(execution | reproduction.sim_settings(scenario)))
    runs = reproduction.execution_of(scenario, traces_dir)
    result = simulate(runs.jobs(workload_for(scenario, elastic)), nodes, policy, tenants=tenants,
                      profiles=runs.profiles, config=config, on_progress=on_progress,
                      estimator=estimator_for(policy), **runs.execution)
    result = dataclasses.replace(result, power_cap_fraction=caps[0], power_caps_by_type=caps[1])
    return result, summarise(result, power).as_dict()


def scheduling_config(scenario: Scenario, cycle: CycleConfig | None = None) -> SchedulingConfig:
    """The scheduling configuration ``scenario`` runs under (the simulator never reads a reason, so by default its
    rounds do not explain counts)."""
    config = SchedulingConfig(
        policy=scenario.policy, policy_config=dict(scenario.policy_config), round_seconds=scenario.round_seconds,
        restart_seconds=scenario.restart_seconds, cycle=cycle or CycleConfig(explain_counts=False),
    )
    return reproduction.scheduling(scenario, config)


def backtest_scenario(scenario: Scenario, traces_dir: Path, every: float = 3600.0) -> BacktestResult:
    """The forecast backtest (sim/backtest.py) of ``scenario``'s trace, cluster, policy and round settings."""
    scheduling = scheduling_config(scenario)
    policy = build_policy(scheduling)
    elastic = (not policy.event_driven) if scenario.elastic is None else scenario.elastic
    nodes, tenants = cluster_for(scenario, traces_dir)
    config = SimConfig.of(scheduling, **({"charge_first_start": scenario.charge_first_start}
                                         | reproduction.sim_settings(scenario)))
    runs = reproduction.execution_of(scenario, traces_dir)

    def fresh_policy() -> Policy:  # each replay and forecast gets its own instance, as each round would
        return build_policy(scheduling)

    return backtest(runs.jobs(workload_for(scenario, elastic)), nodes, fresh_policy, tenants=tenants,
                    profiles=runs.profiles, config=config, every=every, execution=runs.execution)
