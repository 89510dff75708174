"""Power-cap recommendations from what-if runs with a cap per GPU type."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster_ops.reports.recommend import power_cap_candidates
from scheduler.models import WhatIfRun, WhatIfStatus

pytestmark = pytest.mark.django_db
SCENARIO = {"trace": "history.csv", "policy": "tiresias", "load_factor": 1.0, "power_cap_fraction": 1.0}


def finished_run(caps_by_type: dict[str, float], kwh: float, jct_h: float) -> WhatIfRun:
    done = timezone.now() - timedelta(hours=1)
    return WhatIfRun.objects.create(
        scenario={**SCENARIO, "power_caps_by_type": caps_by_type}, status=WhatIfStatus.SUCCEEDED, progress=1.0,
        started_at=done - timedelta(hours=1), finished_at=done,
        summary={"facility_kwh": kwh, "co2_kg": kwh * 0.475, "cost": kwh * 0.1, "avg_jct_s": jct_h * 3600,
                 "p99_jct_s": jct_h * 7200},
    )


def test_a_cap_per_gpu_type_is_compared_with_the_same_run_uncapped_and_named_per_type() -> None:
    run = finished_run({"v100": 0.8, "a100": 0.7}, kwh=920.0, jct_h=10.2)
    finished_run({}, kwh=1000.0, jct_h=10.0)
    finished_run({"a100": 1.0}, kwh=1000.0, jct_h=10.0)  # "capped" at the full limit: a baseline, no advice
    [found] = power_cap_candidates(timezone.now())
    assert found.subject == "caps a100 70%, v100 80%"
    assert found.text.startswith("Cap GPU power per type: a100 at 70%, v100 at 80% of the board limit")
    assert f"what-if run #{run.pk}" in found.text and "8.0% less facility energy" in found.text
