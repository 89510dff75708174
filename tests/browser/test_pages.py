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
