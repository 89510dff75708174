"""The example jobs a lab's ``make run`` submits: the plans, the late arrivals beat holds, and that the contended
plan makes the scheduler both preempt and resize (what the lab demo is there to show)."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest
from django_celery_beat.models import PeriodicTask

from scheduler import lab_examples
from scheduler.core.config import get_policy
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.lab_examples import (
    GLOBAL_BATCH,
    LATE_ARRIVAL_SECONDS,
    LATE_SCHEDULE_NAME,
    Nodes,
    contended,
    spread,
    submit_examples,
    submit_late_examples,
)
from scheduler.models import Job, Tenant
from scheduler.sim.config import SimConfig
from scheduler.sim.engine import simulate
from scheduler.sim.records import SimulationResult, WorkloadJob
from tests.core.policies import cluster

TENANTS = ["nlp", "research", "vision"]
LAB = Nodes(gpus=4, count=4)


@pytest.fixture
def tenants(db: None) -> None:
    for name in TENANTS:
        Tenant.objects.create(name=name)


@pytest.fixture(autouse=True)
def torch_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lab_examples, "have_torch", lambda: True)


def test_the_spread_plan_submits_every_job_at_once_tenants_in_turn(now) -> None:
    plan = spread(6, TENANTS, now, random.Random(0))
    assert [example.tenant for example in plan] == TENANTS * 2
    assert all(example.due(now) and (example.min_gpus, example.max_gpus) == (1, 4) for example in plan)


def test_the_contended_plan_fills_the_nodes_with_whole_node_jobs_then_smaller_ones_arrive(now) -> None:
    plan = contended(6, TENANTS, LAB, now, random.Random(0))
    first, late = plan[:4], plan[4:]
    assert sum(example.min_gpus for example in first) == 16 and all(example.max_gpus == 8 for example in plan)
    assert [example.min_gpus for example in late] == [1, 1]
    assert [example.tenant for example in plan] == TENANTS * 2
    assert not any(example.due(now) for example in late)
    assert all(example.due(now + timedelta(seconds=LATE_ARRIVAL_SECONDS)) for example in late)


def test_late_examples_wait_in_beat_and_are_submitted_once_when_due(tenants: None, now) -> None:
    assert submit_examples(6, now, crowd=LAB) == 6
    assert Job.objects.count() == 4
    held = json.loads(PeriodicTask.objects.get(name=LATE_SCHEDULE_NAME).kwargs)["examples"]
    assert [example["name"] for example in held] == ["example-5", "example-6"]
    assert submit_late_examples(now + timedelta(seconds=LATE_ARRIVAL_SECONDS - 1)) == 0
    assert submit_late_examples(now + timedelta(seconds=LATE_ARRIVAL_SECONDS)) == 2
    assert set(Job.objects.filter(min_gpus=1).values_list("name", flat=True)) == {"example-5", "example-6"}
    assert not PeriodicTask.objects.filter(name=LATE_SCHEDULE_NAME).exists()
    assert submit_late_examples(now + timedelta(seconds=2 * LATE_ARRIVAL_SECONDS)) == 0
    assert submit_examples(6, now, crowd=LAB) == 0  # once: jobs exist
    assert Job.objects.count() == 6


def test_the_contended_plan_makes_sia_preempt_a_job_and_resize(now) -> None:
    """On the lab's nodes (two of four A100s, two of four V100s): every job at its minimum when the small ones
    arrive, Sia preempts a whole-node job to run two; the preempted job resumes and jobs grow as others finish.
    Every job at once (the spread plan) preempts none."""
    result = simulate_on_the_lab(contended(6, TENANTS, LAB, now, random.Random(0)), now)
    assert all(outcome.finish_time is not None for outcome in result.jobs)
    assert sum(outcome.preemptions for outcome in result.jobs) >= 1
    assert sum(outcome.rescales for outcome in result.jobs) >= 1
    assert sum(outcome.preemptions for outcome in simulate_on_the_lab(
        spread(6, TENANTS, now, random.Random(0)), now).jobs) == 0


def simulate_on_the_lab(plan: list[lab_examples.Example], now) -> SimulationResult:
    workload = [WorkloadJob(example.name, 0.0 if example.due(now) else LATE_ARRIVAL_SECONDS, example.tenant,
                            example.min_gpus, example.max_gpus, example.steps * GLOBAL_BATCH, profile="cifar10")
                for example in plan]
    nodes = cluster(4, 4, gpu_type="a100", prefix="a") + cluster(4, 4, gpu_type="v100", prefix="v")
    return simulate(workload, nodes, get_policy("sia-profiled"), profiles=FITTED_PROFILES,
                    config=SimConfig(round_seconds=20.0, restart_seconds=4.0))


def test_beat_sends_the_late_examples_with_its_entry_on_the_rounds_queue(tenants: None, now, settings) -> None:  # type: ignore[no-untyped-def]
    from scheduler import tasks

    submit_examples(6, now - timedelta(seconds=LATE_ARRIVAL_SECONDS + 1), crowd=LAB)
    entry = PeriodicTask.objects.get(name=LATE_SCHEDULE_NAME)
    assert entry.task == lab_examples.LATE_TASK and entry.enabled
    assert settings.CELERY_TASK_ROUTES[entry.task]["queue"] == settings.ROUND_QUEUE  # never behind a report
    assert tasks.submit_late_examples.apply(kwargs=json.loads(entry.kwargs)).get() == 2
    assert Job.objects.count() == 6
