"""The Energy what-if page's callbacks: only staff start what-ifs, and the controls become valid choices."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from cluster_ops.dashboards import energy
from scheduler.core.config import policy_names, policy_summary
from scheduler.models import WhatIfSweep
from scheduler.whatif.history import HISTORY, LIVE_CLUSTER

from .history import History

pytestmark = pytest.mark.django_db
CAPS = [0.8] * len(energy.CAP_TYPES)  # a slider per GPU type, in CAP_TYPES order
DEFAULTS = [HISTORY, 7, LIVE_CLUSTER, None, "fifo", [], 1, 10, 1.0, 1.58, 475, 0.1, *CAPS]


def test_controls_become_choices_with_bounds() -> None:
    caps = [0.7 if gpu_type == "a100" else None for gpu_type in energy.CAP_TYPES]
    values = [HISTORY, 90, LIVE_CLUSTER, "", "pollux", ["on"], 2, 5, 1.0, 1.58, 0, 0.2, *caps]
    choices = energy.choices_from(values)
    assert (choices.days, choices.max_jobs, choices.policy) == (90, None, "pollux")  # no job limit: all jobs
    assert choices.power_caps["a100"] == 0.7 and choices.power_caps["t4"] == 1.0  # an empty slider: uncapped
    assert (choices.power_down_spares, choices.min_off_seconds, choices.load_factor) == (2, 300.0, 1.0)
    assert (choices.pue, choices.grid_g_co2_per_kwh, choices.price_per_kwh) == (1.58, 0.0, 0.2)
    assert energy.choices_from(DEFAULTS).power_down_spares is None  # the switch is off
    with pytest.raises(ValidationError) as refused:  # out of range is refused by name, not clamped
        energy.choices_from([HISTORY, 10_000, *values[2:]])
    assert list(refused.value.message_dict) == ["days"]


@pytest.mark.parametrize(("control", "value", "field"), [
    (1, -3, "days"), (1, 0, "days"), (1, 100_000, "days"), (1, 2.5, "days"), (1, 10**400, "days"),
    (1, None, "days"), (9, None, "pue"), (9, "", "pue"),
    (8, 1e9, "load_factor"), (11, -1, "price_per_kwh"), (3, -5, "max_jobs"), (8, None, "load_factor"),
    (10, float("nan"), "grid_g_co2_per_kwh"), (7, 10**400, "min_off_seconds"),
])
def test_every_bad_or_empty_control_is_refused_by_the_scenarios_own_rule(control: int, value: object,
                                                                         field: str) -> None:
    """Failure 8: −3, 0 or 100,000 days, an empty PUE, load 1e9, price −1, jobs −5 ran with defaults unsaid."""
    values = list(DEFAULTS)
    values[control] = value
    with pytest.raises(ValidationError) as refused:
        energy.choices_from(values)
    assert list(refused.value.message_dict) == [field]
    if field != "days":  # the API's message for the same field
        from scheduler.sim.scenario import number_error

        expected = number_error(field, value * 60 if field == "min_off_seconds" else value)
        assert refused.value.message_dict[field] == [expected]


def test_starts_are_throttled_per_user(history: History, staff: User, settings, tmp_path) -> None:
    settings.VAR_DIR = tmp_path
    said = [str(energy.run_or_list(1, 0, *DEFAULTS, user=staff)[2]) for _ in range(5)]
    assert sum("Started" in text for text in said) == 3 and "try again in" in said[-1]
    assert WhatIfSweep.objects.count() == 3


def test_each_policy_offered_for_a_what_if_says_what_it_trades(history: History, staff: User) -> None:
    _, policies, *_ = energy.init(1, user=staff)
    titles = {option["value"]: option["title"] for option in policies}
    assert titles["sia-hesrpt"] == policy_summary("sia-hesrpt") and titles["tiresias"] == policy_summary("tiresias")
    assert set(titles) == set(policy_names())


def test_a_tenant_user_cannot_start_a_what_if(history: History, vision_user: User) -> None:
    options, shown, message = energy.run_or_list(1, 0, *DEFAULTS, user=vision_user)
    assert "Only operators" in str(message) and not WhatIfSweep.objects.exists()
    assert (options, shown) == ([], None)


def test_a_bad_setting_is_reported_not_raised(history: History, staff: User, settings, tmp_path) -> None:
    settings.VAR_DIR = tmp_path
    values = list(DEFAULTS)
    values[9] = 0.5  # a PUE below 1
    _, shown, message = energy.run_or_list(1, 0, *values, user=staff)
    assert shown is None and "Not started" in str(message) and "pue" in str(message)
    assert not WhatIfSweep.objects.exists()


def test_cap_sliders_show_the_clusters_gpu_types_with_their_limits(history: History) -> None:
    *styles, caption = energy.cap_controls(LIVE_CLUSTER, 0, *CAPS)
    shown = [t for t, style in zip(energy.CAP_TYPES, styles, strict=True) if style.get("display") != "none"]
    assert shown == ["a100", "v100"]  # the inventory's types
    assert "a100 400 → 320 W" in caption and "v100 300 → 240 W" in caption and "t4" not in caption
