"""One typed scheduling configuration, from settings to policy, and the one place that builds a policy.

``SchedulingConfig`` is what a round needs to know beyond the cluster: which policy with which
configuration, how often rounds run, what a restart costs, and the round's elasticity guards. The live
scheduler's settings row, a what-if's ``Scenario``, the forecast, the consequences preview and the backtest
each produce one, and ``build_policy`` turns it into the policy object: so a policy that prices restarts
(Pollux's re-allocation factor, Sia's restart factor) prices the delay the executor or the simulator charges,
live and in what-ifs alike. Every default lives here.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import ConfigDict, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from . import policies  # noqa: F401  (each built-in policy registers itself on import)
from .cycle import DEFAULT_RESTART_SECONDS, CycleConfig
from .policy import POLICIES, Policy, UnknownPolicy
from .restarts import check_restart_delays

DEFAULT_POLICY = "tiresias"
DEFAULT_ROUND_SECONDS = 60.0


@dataclass(frozen=True)
class SchedulingConfig:
    """How rounds are run: the policy and its configuration, the round interval, restart delays, the guards.

    ``policy_config`` is the policy's own constructor configuration (JSON). ``restart_seconds`` is the delay of
    a restart, ``restart_seconds_by_profile`` a workload profile's own where it differs (its checkpoint's size
    sets it); both are charged by whoever runs the jobs and priced by the policies that price restarts.
    """

    policy: str = DEFAULT_POLICY
    policy_config: Mapping[str, Any] = field(default_factory=dict)
    round_seconds: float = DEFAULT_ROUND_SECONDS
    restart_seconds: float = DEFAULT_RESTART_SECONDS
    restart_seconds_by_profile: Mapping[str, float] = field(default_factory=dict)
    cycle: CycleConfig = field(default_factory=CycleConfig)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.round_seconds) and self.round_seconds > 0):
            raise ValueError("round_seconds must be finite and > 0")
        check_restart_delays(self.restart_seconds, self.restart_seconds_by_profile)
        if not isinstance(self.policy_config, Mapping):
            raise ValueError("policy_config must be an object of the policy's settings")

    def restart_delay(self, profile: str | None) -> float:
        """The restart delay of a job of ``profile``."""
        return self.restart_seconds_by_profile.get(profile or "", self.restart_seconds)


def policy_class(name: str) -> type[Policy]:
    """The registered policy ``name`` (``UnknownPolicy`` for no such policy)."""
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownPolicy(name) from None


def build_policy(config: SchedulingConfig) -> Policy:
    """The configured policy. One that prices restarts is given the configured delays unless its own
    configuration names them; a bad configuration raises ``ValueError`` (``TypeError`` for an unknown key)."""
    cls = policy_class(config.policy)
    settings = dict(config.policy_config)
    if cls.capabilities.prices_restarts:
        settings.setdefault("restart_seconds", config.restart_seconds)
        settings.setdefault("restart_seconds_by_profile", dict(config.restart_seconds_by_profile))
    return cls(**settings)


def get_policy(name: str, **policy_config: object) -> Policy:
    """The policy ``name`` with the default scheduling settings: for tests and benches; the product builds its
    policies from the ``SchedulingConfig`` it runs under."""
    return build_policy(SchedulingConfig(policy=name, policy_config=policy_config))


def policy_names() -> list[str]:
    return sorted(POLICIES)


def policy_summary(name: str) -> str:
    """The one-line description an operator reads beside the policy's name (``UnknownPolicy`` for no such policy)."""
    return policy_class(name).summary


def policy_label(name: str) -> str:
    """The policy's name as lists show it: marked "(experimental)" where it is ours, not a published policy."""
    return f"{name} (experimental)" if getattr(policy_class(name), "experimental", False) else name


def policy_config_errors(name: str, policy_config: Any) -> str | None:
    """What is wrong with ``policy_config`` for policy ``name``, in words; None when the policy accepts it.

    Checked against the policy's own schema — its dataclass fields: each key known, each value of the field's type
    (strictly: no "1" for a number, no 1 for a flag) and finite — then against the ranges its constructor enforces.
    """
    if not isinstance(policy_config, Mapping):
        return "Expected an object of the policy's settings."
    try:
        schema = policy_settings(policy_class(name))
    except UnknownPolicy as exc:
        return str(exc)
    unknown = sorted(str(key)[:40] for key in policy_config if key not in schema)
    if unknown:
        takes = ", ".join(sorted(schema)) or "no settings"
        return f"unknown setting {', '.join(unknown)}; {name} takes {takes}."
    for key, value in policy_config.items():
        try:
            TypeAdapter(schema[key], config=STRICT).validate_python(value)
        except PydanticValidationError as exc:
            return f"{key}: {exc.errors()[0]['msg']}."
        if _has_nan(value):
            return f"{key}: Input should be a number, not NaN."
    try:
        build_policy(SchedulingConfig(policy=name, policy_config=policy_config))
    except (TypeError, ValueError) as exc:  # a value out of the range the policy accepts
        return str(exc)
    return None


# As JSON gives them: 1 is a number, "1" and true are not. An infinity may mean "never" (Tiresias's starvation
# factor in the authors' runs); each policy's constructor bounds its own numbers.
STRICT = ConfigDict(strict=True)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, Mapping):
        return any(_has_nan(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_nan(item) for item in value)
    return False


def policy_settings(cls: type[Policy]) -> dict[str, Any]:
    """The settings a policy takes, by name, with their types: its dataclass's constructor fields, or its own
    constructor's keyword parameters (none for a policy built without arguments)."""
    if dataclasses.is_dataclass(cls):
        hints = get_type_hints(cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    init = cls.__init__
    if init is object.__init__:
        return {}
    hints = get_type_hints(init)
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {name: hints.get(name, Any) for name, parameter in inspect.signature(init).parameters.items()
            if name != "self" and parameter.kind in keywords}
