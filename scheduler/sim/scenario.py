"""A what-if scenario: every setting of one simulation, checked by the scenario itself.

A ``Scenario`` that exists is valid: ``__post_init__`` checks every field (types, finite numbers inside
``LIMITS``, known policy, format, preset and GPU types, well-formed node groups, caps and quotas) and raises
``ScenarioError`` with one message per bad field, so no caller repeats the checks and a stored scenario
(``Scenario.from_dict``) is checked the same way. Pure: no Django, no file access (the trace file is resolved
and read by the caller).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.config import (
    DEFAULT_RESTART_SECONDS,
    DEFAULT_ROUND_SECONDS,
    policy_class,
    policy_config_errors,
)
from scheduler.core.policy import UnknownPolicy
from scheduler.core.power import (
    DEFAULT_GRID_G_CO2_PER_KWH,
    DEFAULT_PRICE_PER_KWH,
    DEFAULT_PUE,
    DEFAULT_SPECS,
    PowerModel,
)

from .presets import PRESET_LOADERS
from .profiles import ARTIFACTS
from .trace_formats import FORMATS

# Inclusive bounds of a scenario's numbers; wide enough for any real cluster, narrow enough to refuse typos.
LIMITS: Mapping[str, tuple[float, float]] = {
    "nodes": (1, 10_000), "gpus_per_node": (1, 64), "round_seconds": (1, 86_400), "restart_seconds": (0, 86_400),
    "power_cap_fraction": (0.1, 1.0), "load_factor": (0.01, 100.0), "seed": (0, 2**31 - 1),
    "max_jobs": (1, 10_000_000), "power_down_spares": (0, 10_000), "power_on_seconds": (0, 86_400),
    "min_off_seconds": (0, 86_400), "pue": (1.0, 5.0), "grid_g_co2_per_kwh": (0, 5_000), "price_per_kwh": (0, 1_000),
}
OPTIONAL_FIELDS = frozenset({"max_jobs", "power_down_spares"})  # None: no limit / no power-down
INTEGER_FIELDS = frozenset({"nodes", "gpus_per_node", "seed", "max_jobs", "power_down_spares"})
MAX_TRACE_NAME = 1_000


class ScenarioError(ValueError):
    """A scenario with bad fields; ``errors`` maps each field to what is wrong with it."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {problem}" for name, problem in errors.items()))
        self.errors = dict(errors)


@dataclass(frozen=True)
class Scenario:
    """Everything that defines one what-if run; JSON-friendly so it can be stored and replayed."""

    # The trace file: a path as the caller gives it to ``run_scenario``; what-ifs stored in the console name it
    # relative to TRACES_DIR or their history folder, and ``scheduler.whatif.traces`` resolves it inside them.
    trace: str
    policy: str = "pollux"
    format: str = "auto"
    elastic: bool | None = None  # None: elastic for elastic policies, rigid replay otherwise
    preset: str | None = None  # a cluster preset (presets.py), else nodes × gpus_per_node of gpu_type
    nodes: int = 16
    gpus_per_node: int = 4
    gpu_type: str = "t4"
    round_seconds: float = DEFAULT_ROUND_SECONDS
    restart_seconds: float = DEFAULT_RESTART_SECONDS
    charge_first_start: bool = False
    # Execute jobs with their measured profiles as the Pollux artifact's simulator does, instead of with the
    # fitted models the policies see: efficiency from the validation curves' gradient statistics by batch and
    # epoch (sim/grad_curves.py), step times from the measured placements (sim/step_times.py), and the artifact's
    # per-GPU batch limits (profiles.ARTIFACT_MAX_LOCAL_BSZ) and per-policy job pins (profiles.ARTIFACT_PINNED_JOBS:
    # ncf on one GPU at a fixed batch under pollux); read from traces_dir.
    measured_profiles: bool = False
    # Whose simulator ``measured_profiles`` reproduces: "pollux" (above), or "sia": also Sia's per-model restart
    # delays and SLOWDOWN calibration (profiles.SIA_RESTART_SECONDS, profiles.SIA_SLOWDOWN).
    artifact: str = "pollux"
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
    # What a kWh of GPU energy costs (scheduler.core.power.PowerModel): facility overhead, grid CO₂, price.
    pue: float = DEFAULT_PUE
    grid_g_co2_per_kwh: float = DEFAULT_GRID_G_CO2_PER_KWH
    price_per_kwh: float = DEFAULT_PRICE_PER_KWH

    def __post_init__(self) -> None:
        errors = scenario_errors(self)
        if errors:
            raise ScenarioError(errors)

    def as_dict(self) -> dict[str, Any]:
        # Copies as plain JSON types, so that the stored scenario reads back equal (``scenario_from_dict``).
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


def scenario_from_dict(data: Mapping[str, Any]) -> Scenario:
    """The ``Scenario`` stored as ``data`` (``Scenario.as_dict()``); ``ScenarioError`` naming the field if bad."""
    if not isinstance(data, Mapping):
        raise ScenarioError({"scenario": "Expected an object of scenario fields."})
    known = {f.name for f in dataclasses.fields(Scenario)}
    unknown = {str(name): "Not a scenario field." for name in data if name not in known}
    if unknown or "trace" not in data:
        raise ScenarioError({**unknown, **({} if "trace" in data else {"trace": "A scenario needs a trace."})})
    return Scenario(**data)


def scenario_errors(scenario: Scenario) -> dict[str, str]:
    """Every problem of ``scenario``, by field; empty when it is valid."""
    errors = _number_errors(scenario)
    errors |= _trace_errors(scenario.trace) | _policy_errors(scenario) | _setting_errors(scenario)
    return errors


def _trace_errors(trace: Any) -> dict[str, str]:
    if not isinstance(trace, str) or not trace.strip() or "\x00" in trace or len(trace) > MAX_TRACE_NAME:
        return {"trace": f"Expected the name of a trace file (at most {MAX_TRACE_NAME} characters)."}
    return {}


def _number_errors(scenario: Scenario) -> dict[str, str]:
    errors = {name: problem for name in LIMITS if (problem := number_error(name, getattr(scenario, name)))}
    return errors


def number_error(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the scenario's number field ``name`` (its type and ``LIMITS``), or None:
    the one rule for that field, wherever the value is typed (the API, the Energy page)."""
    low, high = LIMITS[name]
    if value is None and name in OPTIONAL_FIELDS:
        return None
    kind = int if name in INTEGER_FIELDS else (int, float)
    if not isinstance(value, kind) or isinstance(value, bool) or not _finite(value):
        return f"Expected {'an integer' if kind is int else 'a number'}, got {_shown(value)}."
    if not low <= value <= high:
        return f"Must be between {low:g} and {high:g}, got {value!r}."
    return None


def _finite(value: int | float) -> bool:
    """Finite and within a float's range: a 400-digit integer made ``math.isfinite`` raise (a 500)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _shown(value: Any) -> str:
    """A bad value as an error quotes it: short, and never a whole document."""
    try:
        text = repr(value)
    except ValueError:  # an integer past Python's limit on digits printed
        return "a number of too many digits"
    return text if len(text) <= 40 else text[:37] + "..."


def _policy_errors(scenario: Scenario) -> dict[str, str]:
    if not isinstance(scenario.policy, str):
        return {"policy": "Expected a policy name."}
    if not isinstance(scenario.policy_config, Mapping):
        return {"policy_config": "Expected an object of the policy's settings."}
    try:
        json.dumps(dict(scenario.policy_config))
        policy_class(scenario.policy)
    except UnknownPolicy as error:
        return {"policy": str(error)}
    except (TypeError, ValueError) as error:
        return {"policy_config": f"Not a valid configuration of {scenario.policy!r}: {error}"}
    problem = policy_config_errors(scenario.policy, scenario.policy_config)
    return {"policy_config": f"Not a valid configuration of {scenario.policy!r}: {problem}"} if problem else {}


def _one_of(name: Any, names: Mapping[str, Any] | Sequence[str]) -> bool:
    # A name must be a string before it is looked up: a list or an object from JSON is unhashable.
    return isinstance(name, str) and name in names


def _setting_errors(scenario: Scenario) -> dict[str, str]:
    errors = {}
    if not _one_of(scenario.artifact, ARTIFACTS):
        errors["artifact"] = f"Unknown artifact {_shown(scenario.artifact)}; expected one of {', '.join(ARTIFACTS)}."
    if not _one_of(scenario.format, FORMATS):
        errors["format"] = f"Unknown trace format {_shown(scenario.format)}; expected one of {', '.join(FORMATS)}."
    if scenario.preset is not None and not _one_of(scenario.preset, PRESET_LOADERS):
        errors["preset"] = (f"Unknown cluster preset {_shown(scenario.preset)}; "
                            f"expected one of {', '.join(PRESET_LOADERS)}.")
    if scenario.preset is None and not _one_of(scenario.gpu_type, DEFAULT_SPECS):
        known = ", ".join(DEFAULT_SPECS)
        errors["gpu_type"] = f"Unknown GPU type {_shown(scenario.gpu_type)}; expected one of {known}."
    for flag in ("elastic", "charge_first_start", "measured_profiles"):
        allowed = (None, True, False) if flag == "elastic" else (True, False)
        if not any(getattr(scenario, flag) is value for value in allowed):
            errors[flag] = "Expected true, false or empty (the policy decides)." if flag == "elastic" else (
                "Expected true or false.")
    if problem := _node_groups_problem(scenario.node_groups):
        errors["node_groups"] = problem
    if problem := _type_caps_problem(scenario.power_caps_by_type):
        errors["power_caps_by_type"] = problem
    if not isinstance(scenario.tenant_quotas, Mapping) or not all(
        isinstance(name, str) and isinstance(quota, int) and not isinstance(quota, bool) and 0 <= quota <= 10**7
        for name, quota in scenario.tenant_quotas.items()
    ):
        errors["tenant_quotas"] = "Expected tenant names with whole numbers of GPUs ≥ 0."
    return errors


def _type_caps_problem(caps: Any) -> str | None:
    """What is wrong with ``Scenario.power_caps_by_type`` (GPU type → cap fraction), or None."""
    if not isinstance(caps, Mapping):
        return f"Expected GPU types with their cap fractions, got {_shown(caps)}."
    low, high = LIMITS["power_cap_fraction"]
    for gpu_type, cap in caps.items():
        if not _one_of(gpu_type, DEFAULT_SPECS):
            return f"Unknown GPU type {_shown(gpu_type)}; expected one of {', '.join(DEFAULT_SPECS)}."
        if isinstance(cap, bool) or not isinstance(cap, int | float) or not (_finite(cap) and low <= cap <= high):
            return f"The cap of {gpu_type} must be a number between {low:g} and {high:g}, got {_shown(cap)}."
    return None


def _node_groups_problem(groups: Any) -> str | None:
    """What is wrong with ``Scenario.node_groups`` (``[gpu_type, gpus_per_node, nodes]`` each), or None."""
    if not isinstance(groups, list | tuple) or len(groups) > 1_000:
        return "Expected a list of at most 1,000 [gpu_type, gpus_per_node, nodes] groups."
    for group in groups:
        if not isinstance(group, list | tuple) or len(group) != 3:
            return f"Expected [gpu_type, gpus_per_node, nodes] groups, got {_shown(group)}."
        kind, per_node, count = group
        if not _one_of(kind, DEFAULT_SPECS):
            return f"Unknown GPU type {_shown(kind)}; expected one of {', '.join(DEFAULT_SPECS)}."
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in (per_node, count)) or not (
            1 <= per_node <= LIMITS["gpus_per_node"][1] and 1 <= count <= LIMITS["nodes"][1]
        ):
            return f"GPUs per node and nodes must be whole numbers ≥ 1, got {_shown(group)}."
    return None
