"""The Energy what-if page's callbacks: only staff start what-ifs, and the controls become valid choices."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from cluster_ops.dashboards import energy
from cluster_ops.dashboards.energy_data import HISTORY, LIVE_CLUSTER
from scheduler.models import WhatIfSweep

from .history import History

pytestmark = pytest.mark.django_db
DEFAULTS = [HISTORY, 7, LIVE_CLUSTER, None, "fifo", 0.8, [], 1, 10, 1.0, 1.58, 475, 0.1]


def test_controls_become_choices_with_bounds_and_defaults() -> None:
    choices = energy.choices_from([HISTORY, 10_000, LIVE_CLUSTER, "", "pollux", 0.7, ["on"], 2, 5, None, None, 0, 0.2])
    assert (choices.days, choices.max_jobs, choices.policy, choices.power_cap_fraction) == (90, None, "pollux", 0.7)
    assert (choices.power_down_spares, choices.min_off_seconds, choices.load_factor) == (2, 300.0, 1.0)
    assert (choices.pue, choices.grid_g_co2_per_kwh, choices.price_per_kwh) == (1.58, 0.0, 0.2)
    assert energy.choices_from(DEFAULTS).power_down_spares is None  # the switch is off


def test_a_tenant_user_cannot_start_a_what_if(history: History, vision_user: User) -> None:
    options, shown, message = energy.run_or_list(1, 0, *DEFAULTS, user=vision_user)
    assert "Only operators" in str(message) and not WhatIfSweep.objects.exists()
    assert (options, shown) == ([], None)


def test_a_bad_setting_is_reported_not_raised(history: History, staff: User, settings, tmp_path) -> None:
    settings.VAR_DIR = tmp_path
    values = list(DEFAULTS)
    values[10] = 0.5  # a PUE below 1
    _, shown, message = energy.run_or_list(1, 0, *values, user=staff)
    assert shown is None and "Not started" in str(message) and "pue" in str(message)
    assert not WhatIfSweep.objects.exists()
