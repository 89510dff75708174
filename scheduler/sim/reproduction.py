"""The one seam of validation-only behaviour: a scenario that reproduces an artifact's simulator (``Scenario.
measured_profiles``, whose ``artifact`` is "pollux" or "sia") runs as the authors' simulator ran, not as this product
runs a cluster; every other scenario passes through unchanged.

What a reproduction changes, all of it here: jobs run at the authors' measured step times and gradient statistics
(``profiles.load_grad_curves``, ``load_measured_step_times``) while forecasts know the fitted models; the authors'
per-job quirks (``profiles.artifact_jobs``, ``artifact_profiles``); the policies they ran run without this product's
calm guards and starts between rounds; and for Sia, its simulator's restart delays by model, first start charged, and
its SLOWDOWN calibration (``TRACES_DIR/sia/REFERENCE-SETUP.md``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.core.config import SchedulingConfig, policy_class
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.goodput import GoodputModel
from scheduler.core.policies.sia import RESTART_SECONDS as SIA_POLICY_RESTART_SECONDS
from scheduler.core.policies.sia import SiaPolicy

from .profiles import (
    SIA_DEFAULT_RESTART_SECONDS,
    SIA_RESTART_SECONDS,
    SIA_SLOWDOWN,
    artifact_jobs,
    artifact_profiles,
    load_grad_curves,
    load_measured_step_times,
)
from .records import WorkloadJob
from .scenario import Scenario

# The policies each artifact's authors ran, which a reproduction runs as they did: without this product's calm
# guards (payback and settling, cycle.Guards) and its starts between rounds (admission.py), which their simulators do
# not have (a job waits for the next round there). Ours keep them.
REPRODUCED = {"pollux": frozenset({"pollux", "tiresias", "optimus"}),
              "sia": frozenset({"sia", "pollux-unaware", "gavel"})}


@dataclass(frozen=True)
class Execution:
    """How a scenario's jobs execute: the profiles the simulator and its forecasts know, and, in a reproduction,
    what the jobs really run at (``execution`` holds ``grad_curves`` and ``step_times`` for ``simulate``)."""

    profiles: dict[str, dict[str, GoodputModel]]
    execution: dict[str, Any] = field(default_factory=dict)
    reproduces: str | None = None  # the artifact, or None
    policy: str = ""

    def jobs(self, jobs: list[WorkloadJob]) -> list[WorkloadJob]:
        return artifact_jobs(jobs, self.policy) if self.reproduces else jobs


def execution_of(scenario: Scenario, traces_dir: Path) -> Execution:
    if not scenario.measured_profiles:
        return Execution(FITTED_PROFILES)
    return Execution(artifact_profiles(FITTED_PROFILES),
                     {"grad_curves": load_grad_curves(traces_dir), "step_times": load_measured_step_times(traces_dir)},
                     reproduces=scenario.artifact, policy=scenario.policy)


def sim_settings(scenario: Scenario) -> dict[str, Any]:
    """The simulator settings (``SimConfig``) of the artifact reproduced, beyond its profiles and delays."""
    if not (scenario.measured_profiles and scenario.artifact == "sia"):
        return {}
    return {"slowdown_by_profile": SIA_SLOWDOWN, "charge_first_start": True}


def scheduling(scenario: Scenario, config: SchedulingConfig) -> SchedulingConfig:
    """A reproduced policy runs without the calm guards; Sia's simulator charges its own restart delays by model,
    and its policy prices another table of them (policies/sia.py, ``RESTART_SECONDS``): the reproduced ``sia``
    prices that table, ours price the delays charged, as on a live cluster."""
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
