"""Forecasts in Chromium: the Overview, Jobs and Fairness pages show when waiting jobs start, to their tenant."""

from __future__ import annotations

import pytest

from .conftest import dashboard_frame, wait_for_charts

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tenant_sees_when_its_waiting_jobs_start_and_nothing_of_the_others(  # type: ignore[no-untyped-def]
        tenant_page, dashboard_data, open_dashboard, live_server, screenshot) -> None:
    from scheduler.forecasting import forecasts
    from scheduler.models import QUEUED_STATES, Job

    assert forecasts.refresh(force=True) is not None
    theirs = {f"{j.name} #{j.pk}" for j in Job.objects.filter(tenant__name="vision", state__in=QUEUED_STATES)}
    others = {j.name for j in Job.objects.exclude(tenant__name="vision")}
    assert theirs, "the seeded cluster has waiting vision jobs"
    frame = open_dashboard(tenant_page, "overview")
    frame.wait_for_selector("#overview-next-table tbody tr")
    rows = frame.locator("#overview-next-table tbody tr").all_inner_texts()
    assert {row.split("\t")[0] for row in rows} <= theirs and len(rows) == min(len(theirs), 10)
    assert any("starts in ~" in row for row in rows)
    table = frame.locator("#overview-next-table").inner_text()
    assert not any(f"job {name} (" in table for name in others)  # another tenant's job is never named
    screenshot(tenant_page, "overview-forecast")

    tenant_page.goto(f"{live_server.url}/dash/jobs/")
    jobs = dashboard_frame(tenant_page)
    jobs.wait_for_selector("#jobs-waiting tbody tr")
    assert "starts in ~" in jobs.locator("#jobs-waiting").inner_text()

    tenant_page.goto(f"{live_server.url}/dash/fairness/")
    fairness = dashboard_frame(tenant_page)
    wait_for_charts(fairness)
    fairness.wait_for_selector("#fair-pending-forecast")
    assert "Forecast:" in fairness.locator("#fair-pending-forecast").inner_text()
