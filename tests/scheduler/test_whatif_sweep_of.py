"""What-if sweeps of explicit scenarios (a baseline and a what-if), and the new scenario fields' validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from scheduler import whatif
from scheduler.models import WhatIfRun, WhatIfSweep
from scheduler.sim.runner import Scenario, ScenarioError

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def scenario(settings) -> Scenario:  # type: ignore[no-untyped-def]
    settings.TRACES_DIR = FIXTURES
    return Scenario(trace="pollux/workloads-realistic/workload-1.csv", policy="fifo", nodes=2)


def test_a_sweep_of_given_scenarios_keeps_their_order(scenario: Scenario) -> None:
    what_if = dataclasses.replace(scenario, policy="pollux", power_cap_fraction=0.8, power_down_spares=1)
    sweep = whatif.create_sweep_of([scenario, what_if], name="pair")
    runs = list(sweep.runs.order_by("pk"))
    assert [r.scenario for r in runs] == [scenario.as_dict(), what_if.as_dict()]
    assert sweep.name == "pair"


@pytest.mark.parametrize(("change", "field"), [
    ({"pue": 0.9}, "pue"),
    ({"grid_g_co2_per_kwh": -1.0}, "grid_g_co2_per_kwh"),
    ({"price_per_kwh": float("inf")}, "price_per_kwh"),
    ({"node_groups": [["z80", 8, 1]]}, "node_groups"),
    ({"node_groups": [["a100", 0, 1]]}, "node_groups"),
    ({"node_groups": [["a100", 8]]}, "node_groups"),
    ({"tenant_quotas": {"vision": -1}}, "tenant_quotas"),
    ({"tenant_quotas": {"vision": 1.5}}, "tenant_quotas"),
])
def test_a_bad_scenario_in_a_sweep_is_refused_and_nothing_is_written(
    scenario: Scenario, change: dict[str, Any], field: str
) -> None:
    with pytest.raises(ScenarioError) as refused:  # a scenario checks its own fields
        whatif.create_sweep_of([scenario, dataclasses.replace(scenario, **change)])
    assert field in refused.value.errors
    assert not WhatIfSweep.objects.exists() and not WhatIfRun.objects.exists()


def test_an_empty_sweep_is_refused() -> None:
    with pytest.raises(ValidationError):
        whatif.create_sweep_of([])


def test_a_stored_scenario_with_node_groups_reads_back(scenario: Scenario) -> None:
    mixed = dataclasses.replace(scenario, node_groups=[["a100", 8, 1], ["v100", 8, 1]], tenant_quotas={"a": 4})
    run = whatif.create_run(mixed)
    run.refresh_from_db()
    assert whatif.scenario_from_dict(run.scenario).as_dict() == mixed.as_dict()
