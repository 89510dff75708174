"""The demo's rounds replayed: ``make run``'s cluster, jobs, policy and round interval, through the
simulator — the same ``run_cycle`` the live rounds call, on the demo's wall clock — and calm as the live cluster
must be: no change of nothing, every move between types says so, and a job that changes two rounds running, or
slows down, does it for other jobs that it names."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from django.conf import settings

import scheduler.sim.engine as engine
from scheduler.core.config import DEFAULT_RESTART_SECONDS, SchedulingConfig, build_policy
from scheduler.core.cycle import Action
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.demo import DEMO_POLICY, DEMO_SPEEDUP, wall_clock_replay
from scheduler.sim.config import SimConfig
from scheduler.sim.presets import DEMO, build_nodes


class Change(NamedTuple):
    round: int
    job: str
    before: tuple[int, str]  # GPUs and their type
    after: tuple[int, str]
    reason: str


@pytest.fixture(scope="module")
def changes() -> list[Change]:
    """Every rescale of the replay, round by round."""
    jobs, tenants = wall_clock_replay(settings.TRACES_DIR)
    config = SchedulingConfig(policy=DEMO_POLICY, round_seconds=float(settings.DEMO_ROUND_SECONDS),
                              restart_seconds=DEFAULT_RESTART_SECONDS / DEMO_SPEEDUP)
    seen: list[Change] = []
    rounds = 0
    real: Callable[..., Any] = engine.run_cycle

    def recording(snap, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal rounds
        result = real(snap, *args, **kwargs)
        type_of = snap.index.type_of
        for d in result.changes:
            if d.action is Action.RESCALE:
                seen.append(Change(rounds, d.job_id, (len(d.previous), type_of[d.previous[0]]),
                                   (len(d.gpus), type_of[d.gpus[0]]), d.reason))
        rounds += 1
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "run_cycle", recording)
        result = engine.simulate(jobs, build_nodes(DEMO), build_policy(config), tenants=tenants,
                                 profiles=FITTED_PROFILES, config=SimConfig.of(config))
    assert all(job.finish_time is not None for job in result.jobs) and rounds > 20
    return seen


def slows_down(change: Change) -> bool:
    """A shrink on its type, or a move whose reason prices it below 1× its speed."""
    if change.before[1] == change.after[1]:
        return change.after[0] < change.before[0]
    speed = re.search(r": (\d+\.\d)× its speed there", change.reason)
    assert speed, change
    return float(speed.group(1)) < 1.0


def test_the_replay_rescales_jobs(changes: list[Change]) -> None:
    assert len(changes) >= 5  # else the properties below would hold of nothing
    assert any(slows_down(change) for change in changes)


def test_no_change_is_a_change_of_nothing(changes: list[Change]) -> None:
    assert [change for change in changes if change.before == change.after] == []


def test_every_move_between_types_says_so(changes: list[Change]) -> None:
    for change in changes:
        if change.before[1] != change.after[1]:
            assert change.reason.startswith(f"moved {change.before[1]} → {change.after[1]}"), change


def test_a_job_slowed_down_names_the_jobs_its_gpus_went_to(changes: list[Change]) -> None:
    for change in filter(slows_down, changes):
        assert f"its {change.before[1]} GPUs went to" in change.reason, change


def test_a_job_changed_two_rounds_running_names_the_jobs_its_gpus_went_to(changes: list[Change]) -> None:
    """The guards let a job change again a round after a change only where the policy gave its GPUs to others
    (cycle.Guards): the second change names them."""
    last_round: dict[str, int] = {}
    for change in changes:
        if last_round.get(change.job) == change.round - 1:
            assert f"its {change.before[1]} GPUs went to" in change.reason, change
        last_round[change.job] = change.round


def test_the_replay_is_the_demo(changes: list[Change]) -> None:
    """What the replay stands for: the live demo's settings (seed_demo) and cluster."""
    jobs, tenants = wall_clock_replay(settings.TRACES_DIR)
    assert {tenant.name for tenant in tenants} == {"vision", "language", "research"}
    assert all(job.min_gpus == 1 and job.profile for job in jobs)
    assert sum(group.count * group.gpus_per_node for group in DEMO.nodes) == 128
