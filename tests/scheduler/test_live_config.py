"""The live scheduler's configuration reaches the policy: restart delays priced as charged, the
policy's own settings, and the round's memory kept apart from the policy's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from scheduler.core.config import build_policy
from scheduler.core.policies.pollux import PolluxPolicy
from scheduler.jobs import verbs
from scheduler.live import memory
from scheduler.live import round as rounds
from scheduler.live.config import scheduling_config, update_settings
from scheduler.models import PolicyState, RoundMemory, SchedulingRound


def test_the_live_policy_prices_the_restart_the_executor_charges(db: None) -> None:
    """Pollux priced 30 s live whatever ``restart_seconds`` said; the simulated executor charges it on its clock,
    ``simulated_speedup`` times faster than the round's."""
    update_settings(policy="pollux", restart_seconds=600.0, executor="simulated", simulated_speedup=4.0)
    policy = build_policy(scheduling_config())
    assert isinstance(policy, PolluxPolicy) and policy.restart_seconds == 150.0
    update_settings(executor="local")
    policy = build_policy(scheduling_config())
    assert isinstance(policy, PolluxPolicy) and policy.restart_seconds == 600.0


def test_the_policy_s_own_settings_reach_the_live_round(db: None) -> None:
    update_settings(policy="pollux", policy_config={"p": -2.0})
    policy = build_policy(scheduling_config())
    assert isinstance(policy, PolluxPolicy) and policy.p == -2.0


@pytest.mark.parametrize("bad", [{"p": 0}, {"nonsense": 1}, [1]])
def test_a_policy_configuration_the_policy_refuses_is_refused_by_the_service(db: None, bad: object) -> None:
    with pytest.raises(ValidationError) as raised:
        update_settings(policy="pollux", policy_config=bad)
    assert "policy_config" in raised.value.message_dict


def test_switching_policy_keeps_the_round_s_rescale_history(db: None, tenant, node, now) -> None:
    """``max_rescales_per_hour`` counts a job's rescales whatever the policy: the history is the round's."""
    update_settings(policy="pollux")
    RoundMemory.objects.update_or_create(pk=1, defaults={"rescales": {"7": [now.timestamp() - 60]}})
    update_settings(policy="fifo")
    job = verbs.submit_job(tenant=tenant, name="j", workload_profile="trace", total_work=1e5, min_gpus=1,
                              max_gpus=1, submitted_at=now - timedelta(seconds=5))
    assert rounds.run_round(now=now) is not None
    assert RoundMemory.objects.get().rescales == {}  # job 7 is gone: its history is dropped, not kept per policy
    RoundMemory.objects.filter(pk=1).update(rescales={str(job.pk): [now.timestamp() - 60]})
    update_settings(policy="pollux")
    assert rounds.run_round(now=now + timedelta(seconds=60)) is not None
    assert RoundMemory.objects.get().rescales == {str(job.pk): [now.timestamp() - 60]}  # carried across the switch
    assert set(PolicyState.objects.values_list("policy", flat=True)) == {"fifo", "pollux"}  # one memory each


def test_the_round_memory_keeps_apart_what_a_job_gave_up_for_others(db: None, now) -> None:
    """A live round remembers a job's last shrink for others apart from its own rescales (guards.RescaleHistory):
    settling counts both, the hourly limit only its own."""
    round_row = SchedulingRound.objects.create(policy="pollux", started_at=now)
    state = {"policy": {}, "rescales": {"7": [now.timestamp() - 300]}, "yielded": {"8": now.timestamp() - 60}}
    memory.store_round_state("pollux", state, round_row)
    assert memory.load_round_state("pollux") == state
    RoundMemory.objects.filter(pk=1).update(yielded={})  # a row written before yields were kept apart
    assert memory.load_round_state("pollux")["yielded"] == {}


def test_a_solver_without_an_answer_is_recorded_on_the_round(db: None, tenant, node, now, monkeypatch) -> None:
    from types import SimpleNamespace

    from scheduler.core.policies import sia

    update_settings(policy="sia")
    verbs.submit_job(tenant=tenant, name="j", workload_profile="cifar10", total_work=1e6, min_gpus=1,
                        max_gpus=4, submitted_at=now - timedelta(seconds=5))
    assert rounds.run_round(now=now).starts == 1
    monkeypatch.setattr(sia, "milp", lambda *args, **kwargs: SimpleNamespace(x=None, status=1))
    row = rounds.run_round(now=now + timedelta(seconds=60))
    assert row is not None and (row.preemptions, row.rescales) == (0, 0)
    assert "solver gave no answer" in SchedulingRound.objects.get(pk=row.pk).note


def test_a_stored_configuration_the_policy_refuses_is_refused_and_the_round_runs(db: None, tenant, node,
                                                                                  now) -> None:
    """Settings saved before a policy changed its settings: the round runs on the last valid configuration and the
    refused one is named (``live_settings``), rather than every round failing."""
    from scheduler.live.config import live_settings
    from scheduler.models import RoundStatus, SchedulerSettings

    update_settings(policy="pollux")
    SchedulerSettings.objects.filter(pk=1).update(policy_config={"no_longer_a_setting": 1})
    row = rounds.run_round(now=now)
    assert row is not None and row.status == RoundStatus.OK
    assert "no_longer_a_setting" in " ".join(live_settings()[1]["policy_config"])
