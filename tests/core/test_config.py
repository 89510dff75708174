"""The one scheduling configuration (scheduler/core/config.py): the only builder of policies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from scheduler.core.config import (
    DEFAULT_RESTART_SECONDS,
    SchedulingConfig,
    build_policy,
    policy_config_errors,
    policy_names,
    policy_summary,
)
from scheduler.core.policies.pollux import PolluxPolicy
from scheduler.core.policies.sia import SiaPolicy
from scheduler.core.policy import (
    POLICIES,
    SUMMARY_LIMIT,
    Capabilities,
    UnknownPolicy,
    register,
)

from .policies import job


@pytest.mark.parametrize("name", ["pollux", "sia", "sia-profiled"])
def test_a_policy_that_prices_restarts_prices_the_configured_delay(name: str) -> None:
    policy = build_policy(SchedulingConfig(policy=name, restart_seconds=90.0,
                                           restart_seconds_by_profile={"bert": 200.0}))
    assert isinstance(policy, PolluxPolicy | SiaPolicy)
    assert policy.restart_delay(job("j", profile="cifar10")) == 90.0
    assert policy.restart_delay(job("k", profile="bert")) == 200.0


def test_the_policy_s_own_configuration_wins_over_the_round_s_delays() -> None:
    policy = build_policy(SchedulingConfig(policy="pollux", policy_config={"restart_seconds": 5.0},
                                           restart_seconds=90.0))
    assert isinstance(policy, PolluxPolicy) and policy.restart_seconds == 5.0


def test_the_restart_default_has_one_home() -> None:
    assert SchedulingConfig().restart_seconds == DEFAULT_RESTART_SECONDS
    assert PolluxPolicy().restart_seconds == SiaPolicy().restart_seconds == DEFAULT_RESTART_SECONDS


def test_every_policy_declares_typed_capabilities() -> None:
    for name in policy_names():
        assert isinstance(POLICIES[name].capabilities, Capabilities), name


def test_every_policy_says_in_one_line_of_its_own_what_it_trades() -> None:
    summaries = {name: POLICIES[name].__dict__.get("summary") for name in policy_names()}
    for name, summary in summaries.items():
        assert isinstance(summary, str) and summary.strip() and "\n" not in summary, name
        assert len(summary) <= SUMMARY_LIMIT, name
    assert len(set(summaries.values())) == len(summaries)  # no policy describes itself as another does
    hesrpt = policy_summary("sia-hesrpt")
    assert "lowest average JCT" in hesrpt and "long jobs finish later" in hesrpt


def test_a_policy_without_its_own_summary_is_refused_by_the_registry() -> None:
    @dataclass(frozen=True)
    class Unsaid(SiaPolicy):  # inherits sia's summary, which would describe sia in the operator's list
        name: ClassVar[str] = "unsaid"

    with pytest.raises(TypeError, match="summary"):
        register(Unsaid)
    assert "unsaid" not in POLICIES
    with pytest.raises(UnknownPolicy):
        policy_summary("unsaid")


@pytest.mark.parametrize("bad", [{"restart_seconds": float("nan")}, {"no_such_setting": 1}, [1, 2]])
def test_a_bad_policy_configuration_is_named_not_raised(bad: object) -> None:
    assert policy_config_errors("pollux", bad)


@pytest.mark.parametrize("field, value", [("round_seconds", 0.0), ("restart_seconds", -1.0),
                                          ("restart_seconds", float("inf"))])
def test_a_configuration_refuses_impossible_numbers(field: str, value: float) -> None:
    with pytest.raises(ValueError):
        SchedulingConfig(**{field: value})
