"""The Overview and Utilisation pages in Chromium: they draw, react to filters, and keep tenants apart."""

from __future__ import annotations

import re

import pytest

from cluster_ops.dashboards.pages import PAGES

from .conftest import chart_meta, chart_traces

pytestmark = pytest.mark.django_db(transaction=True)


def test_anonymous_visitor_is_sent_to_the_login_form(page, live_server) -> None:  # type: ignore[no-untyped-def]
    for path in ("/", "/dash/overview/", "/dash/utilisation/", "/django_plotly_dash/app/overview/"):
        page.goto(f"{live_server.url}{path}")
        assert re.search(r"/accounts/login/\?next=", page.url), (path, page.url)
        assert page.locator("#id_username").is_visible()


def test_navigation_lists_every_page_and_admin_for_staff(staff_page, live_server) -> None:  # type: ignore[no-untyped-def]
    staff_page.goto(f"{live_server.url}/dash/overview/")
    nav = staff_page.locator("nav .nav-link")
    titles = nav.all_inner_texts()
    assert titles[: len(PAGES)] == [p.title for p in PAGES] and titles[-1] == "Admin"
    assert staff_page.locator("nav .nav-link.active").inner_text() == "Overview"


def test_overview_draws_the_cluster(staff_page, dashboard_data, open_dashboard, screenshot) -> None:  # type: ignore[no-untyped-def]
    frame = open_dashboard(staff_page, "overview")
    for graph in ("overview-gpus", "overview-tenant-jobs", "overview-waits"):
        assert chart_meta(frame, graph) == "drawn" and chart_traces(frame, graph) > 0, graph
    stats = frame.locator("#overview-stats").inner_text()
    assert "NODES READY" in stats.upper() and "1 cordoned" in stats
    tenants = frame.locator("#overview-tenants-table tbody tr").all_inner_texts()
    assert [row.split("\t")[0] for row in tenants] == ["language", "research", "vision"]
    alerts = frame.locator("#overview-alerts").inner_text()
    assert "lost GPU" in alerts and "fallen off the bus" in alerts and "long wait" in alerts
    assert "Policy" in frame.locator("#overview-round").inner_text()
    screenshot(staff_page, "overview")


def test_utilisation_draws_and_follows_its_filters(staff_page, dashboard_data, open_dashboard,  # type: ignore[no-untyped-def]
                                                  screenshot) -> None:
    frame = open_dashboard(staff_page, "utilisation")
    for graph in ("util-over-time", "util-heatmap", "util-idle-tenants", "util-idle-jobs"):
        assert chart_meta(frame, graph) == "drawn" and chart_traces(frame, graph) > 0, graph
    screenshot(staff_page, "utilisation")
    span_h = """() => {
      const x = document.querySelector('#util-over-time .js-plotly-plot').data[0].x;
      return (Date.parse(x[x.length - 1]) - Date.parse(x[0])) / 3600000;
    }"""
    assert 22 <= frame.evaluate(span_h) <= 25  # the last 24 hours (from the start of the hour they begin in)
    frame.select_option("#util-range", "1h")
    # The last hour, minute by minute from the minute it starts in, to now (the latest samples).
    frame.wait_for_function(f"() => ({span_h})() <= 1 + 1.5 / 60")
    assert frame.evaluate(span_h) >= 0.9
    rows = "() => document.querySelector('#util-heatmap .js-plotly-plot').data[0].y.length"
    assert frame.evaluate(rows) == 16  # every GPU of the inventory has a row
    node = frame.locator("#util-scope option", has_text="node node-0000").get_attribute("value")
    frame.select_option("#util-scope", node)
    frame.wait_for_function(f"() => ({rows})() === 8")


def test_tenant_user_sees_only_their_tenant(tenant_page, open_dashboard, screenshot) -> None:  # type: ignore[no-untyped-def]
    frame = open_dashboard(tenant_page, "overview")
    tenants = frame.locator("#overview-tenants-table tbody tr").all_inner_texts()
    assert [row.split("\t")[0] for row in tenants] == ["vision"]
    text = frame.locator("body").inner_text()
    assert "language" not in text and "research" not in text
    assert tenant_page.locator("nav .nav-link", has_text="Admin").count() == 0
    screenshot(tenant_page, "overview-tenant")
    frame = open_dashboard(tenant_page, "utilisation")
    options = [o for o in frame.locator("#util-scope option").all_inner_texts() if o]  # less the placeholder
    assert options == ["tenant vision"]
    jobs = frame.evaluate("() => document.querySelector('#util-idle-jobs .js-plotly-plot').data[0].y")
    assert jobs and all("vision)" in label for label in jobs)
    screenshot(tenant_page, "utilisation-tenant")


def test_the_24_hour_view_shows_minute_detail_in_the_first_hour(staff_page, dashboard_data, open_dashboard,  # type: ignore[no-untyped-def]
                                                                 screenshot) -> None:
    """A cluster 90 minutes old (one hour rolled up, the minutes since) opens on its 90 minutes, not on a day of
    empty axis: a drain 50 minutes ago, 10 minutes long, shows minute by minute, and the heatmap shares the line's
    axis; the 24-hour view still shows it in minutes."""
    from datetime import datetime, timedelta

    from django.utils import timezone

    from scheduler.models import Allocation
    from telemetry.models import GpuHour, GpuMinute, ScopeMinute
    now = timezone.now()
    born = now - timedelta(minutes=90)
    for model in (GpuHour, GpuMinute, ScopeMinute):
        model.objects.filter(start__lt=born).delete()
    Allocation.objects.filter(ended_at__lt=born).delete()
    Allocation.objects.filter(started_at__lt=born).update(started_at=born)
    drained = ScopeMinute.objects.filter(scope="cluster", start__gte=now - timedelta(minutes=50),
                                         start__lt=now - timedelta(minutes=40))
    assert drained.update(allocated_seconds=5 * 60, idle_allocated_seconds=0) >= 9
    frame = open_dashboard(staff_page, "utilisation")
    line = frame.evaluate("""() => {
      const plot = document.querySelector('#util-over-time .js-plotly-plot');
      return {x: plot.data[0].x, y: plot.data[0].y, range: plot.layout.xaxis.range};
    }""")
    assert len(line["x"]) >= 85  # a point a minute since the cluster's first minute
    assert line["y"].count(5) >= 9 and max(v for v in line["y"] if v is not None) > 5  # the drain, minute by minute
    heatmap_range = frame.evaluate("() => document.querySelector('#util-heatmap .js-plotly-plot').layout.xaxis.range")
    # The same axis: both span the range chosen (each callback reads the clock, milliseconds apart).
    seconds = [abs(datetime.fromisoformat(a) - datetime.fromisoformat(b)).total_seconds()
               for a, b in zip(heatmap_range, line["range"], strict=True)]
    assert max(seconds) < 5 and 1.45 <= (datetime.fromisoformat(line["range"][1]) -
                                          datetime.fromisoformat(line["range"][0])).total_seconds() / 3600 <= 1.6
    chosen = frame.locator("#util-range option:checked").inner_text()
    assert chosen.startswith("since the first data (9")  # 90 or 91 minutes, as the clock turns
    screenshot(staff_page, "utilisation-first-hour")
    frame.select_option("#util-range", "24h")
    frame.wait_for_function("""() => {
      const r = document.querySelector('#util-over-time .js-plotly-plot').layout.xaxis.range;
      return (Date.parse(r[1]) - Date.parse(r[0])) / 3600000 > 23.9;
    }""")
    counts = frame.evaluate("() => document.querySelector('#util-over-time .js-plotly-plot').data[0].y")
    assert counts.count(5) >= 9  # the drain, minute by minute in the day's view too
