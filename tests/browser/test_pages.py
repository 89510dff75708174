"""The pages around the dashboards in Chromium: no console error or warning on any (the guard in conftest),
the favicon, and the API documentation drawn from local files."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = ("/reports/", "/admin/", "/admin/scheduler/job/", "/admin/scheduler/schedulinground/",
         "/admin/scheduler/whatifrun/", "/admin/scheduler/rescaleevent/")


def test_every_page_loads_cleanly_with_a_favicon(staff_page, live_server, dashboard_data) -> None:  # type: ignore[no-untyped-def]
    for path in PAGES:
        response = staff_page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == 200, path
    icon = staff_page.request.get(f"{live_server.url}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")


def test_api_docs_draw_offline(staff_page, live_server) -> None:  # type: ignore[no-untyped-def]
    staff_page.goto(f"{live_server.url}/api/docs/")
    staff_page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "Cluster Ops API" in staff_page.locator(".swagger-ui .info .title").inner_text()
    assert staff_page.locator(".opblock-summary-path").filter(has_text="/api/jobs/").count() > 0
    ARTIFACTS.mkdir(exist_ok=True)
    staff_page.screenshot(path=str(ARTIFACTS / "api-docs.png"))


LISTS = ("/admin/scheduler/job/", "/admin/scheduler/schedulinground/", "/admin/scheduler/rescaleevent/",
         "/admin/scheduler/whatifrun/")
# True when the change list's table is as wide as its box (no column cut off, no sideways scrolling) and the box
# ends inside the window.
FITS = """() => {
  const table = document.querySelector('#result_list');
  const box = table.closest('.results') || table.parentElement;
  return table.scrollWidth <= box.clientWidth + 1 && box.getBoundingClientRect().right <= window.innerWidth;
}"""


def test_admin_lists_fit_1366_pixels(staff_page, live_server, dashboard_data, staff_user) -> None:  # type: ignore[no-untyped-def]
    from scheduler.forecasting import forecasts
    from scheduler.models import WhatIfRun
    from scheduler.sim.scenario import Scenario
    assert forecasts.refresh(force=True) is not None  # the job list's estimate column filled
    WhatIfRun.objects.create(scenario=Scenario(trace="pollux/workload-6.csv").as_dict(), created_by=staff_user,
                             progress=0.4)
    staff_page.set_viewport_size({"width": 1366, "height": 768})
    for path in LISTS:
        staff_page.goto(f"{live_server.url}{path}")
        assert staff_page.locator("#result_list tbody tr").count() > 0, path
        assert staff_page.evaluate(FITS), f"{path}: the list is wider than 1366 px"
    ARTIFACTS.mkdir(exist_ok=True)
    staff_page.goto(f"{live_server.url}/admin/scheduler/job/")
    staff_page.screenshot(path=str(ARTIFACTS / "admin-jobs-1366.png"))


def test_changing_the_policy_previews_the_next_round_then_saves(staff_page, live_server, dashboard_data) -> None:  # type: ignore[no-untyped-def]
    from scheduler.live.config import scheduler_settings
    from scheduler.models import SchedulerSettings
    before = scheduler_settings().policy
    other = "tiresias" if before != "tiresias" else "pollux"
    staff_page.goto(f"{live_server.url}/admin/scheduler/schedulersettings/")
    staff_page.select_option("#id_policy", other)
    staff_page.click("input[name=_save]")
    staff_page.wait_for_selector("#preview-summary")
    assert f"policy {before} → {other}" in staff_page.locator("#content-main").inner_text()
    assert SchedulerSettings.objects.get().policy == before
    ARTIFACTS.mkdir(exist_ok=True)
    staff_page.screenshot(path=str(ARTIFACTS / "admin-policy-preview.png"), full_page=True)
    staff_page.click("input[value='Save it']")
    staff_page.wait_for_url("**/admin/scheduler/schedulersettings/**")
    assert SchedulerSettings.objects.get().policy == other
