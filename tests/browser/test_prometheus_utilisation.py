"""The Utilisation page drawn from telemetry read off a real Prometheus (fixture dcgm-exporters), in Chromium."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from telemetry import prometheus
from telemetry.rollups import roll_up_minutes
from tests.integration.test_prometheus_source import Lab, lab, scraped  # noqa: F401  (lab: a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.needs("alerting")]


def test_the_utilisation_page_draws_what_prometheus_holds(lab: Lab, staff_page, open_dashboard,  # type: ignore[no-untyped-def]  # noqa: F811
                                                          screenshot) -> None:
    scraped(lab)
    assert prometheus.collect().ok
    roll_up_minutes(timezone.now() + timedelta(minutes=2))

    frame = open_dashboard(staff_page, "utilisation")

    heatmap = frame.evaluate("""() => {
      const plot = document.querySelector('#util-heatmap .js-plotly-plot');
      const z = plot._fullData[0].z;  // decoded (the figure sends typed arrays)
      return {rows: Array.from(plot._fullData[0].y), values: Array.from(z, row => Array.from(row))};
    }""")
    values = {row: [v for v in line if v is not None and v == v]  # blank (None or NaN): no telemetry then
              for row, line in zip(heatmap["rows"], heatmap["values"], strict=True)}
    # every GPU of the inventory has a row, drawn with the exporters' values (engine active 50 % and 25 %,
    # DCGM_FI_DEV_GPU_UTIL 80 % and 0 % where the exporter has no profiling series)
    assert set(values) == {"gpu01/gpu0", "gpu01/gpu1", "gpu02/gpu0", "gpu02/gpu1"}
    assert {row: set(v) for row, v in values.items()} == {
        "gpu01/gpu0": {50.0}, "gpu01/gpu1": {25.0}, "gpu02/gpu0": {80.0}, "gpu02/gpu1": {0.0}}
    screenshot(staff_page, "utilisation-prometheus")
