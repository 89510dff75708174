"""The Fairness, Jobs and Energy what-if pages in Chromium: they draw, follow their filters, run a what-if to its
comparison, and keep tenants apart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from cluster_ops.celery import app as celery_app
from scheduler import whatif
from scheduler.models import WhatIfRun, WhatIfStatus, WhatIfSweep
from telemetry.ledger import held_over_time
from telemetry.rollups import HOURS, floor
from tests.dashboards.history import History, seed_history

from .conftest import chart_meta, chart_traces

pytestmark = pytest.mark.django_db(transaction=True)

DRAWN = ("drawn",)
X_POINTS = "id => document.querySelector('#' + id + ' .js-plotly-plot').data[0].x.length"
Y_LABELS = "id => [...new Set(document.querySelector('#' + id + ' .js-plotly-plot').data[0].y)]"


def drawn(frame, *graphs: str) -> None:  # type: ignore[no-untyped-def]
    for graph in graphs:
        assert chart_meta(frame, graph) == "drawn" and chart_traces(frame, graph) > 0, graph
        assert frame.locator(f"#{graph} .main-svg .trace").count() > 0, graph  # the traces are in the SVG


def options(frame, select_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The labels of a select's options (not its empty placeholder)."""
    return frame.evaluate("id => [...document.querySelectorAll('#' + id + ' option')].filter(o => o.value)"
                          ".map(o => o.textContent)", select_id)


@pytest.fixture
def job_history(transactional_db: None) -> History:
    """A day of a small cluster with rescales and a preemption (tests/dashboards/history.py): jobs whose work
    matches their run times, so JCTs, ρ and a replayed history look like a real cluster's."""
    return seed_history(timezone.now())


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """What-if tasks run inside the request that starts them (on the app: a test's settings cannot)."""
    import scheduler.tasks  # noqa: F401  (registers the tasks, as a worker's autodiscovery does)

    celery_app.conf.update(task_always_eager=True)
    yield
    celery_app.conf.update(task_always_eager=False)


def test_fairness_draws_and_follows_the_time_range(staff_page, dashboard_data, open_dashboard,  # type: ignore[no-untyped-def]
                                                   screenshot) -> None:
    frame = open_dashboard(staff_page, "fairness")
    drawn(frame, "fair-shares", "fair-jain", "fair-rho")
    assert chart_meta(frame, "fair-borrowed") in ("drawn", "empty")
    titles = frame.locator("#fair-shares .annotation-text").all_text_contents()
    assert {"language", "research", "vision"} <= {t.split(" ")[0] for t in titles}
    why = frame.locator("#fair-pending-detail").inner_text().lower()
    assert "queue position" in why and "last round:" in why and "waiting for free gpus" in why
    assert frame.locator("#fair-holders tbody tr").count() > 0
    assert "observes a slurm cluster" in frame.locator("#fair-slurm").inner_text().lower()  # not observing Slurm
    screenshot(staff_page, "fairness")
    day = frame.evaluate(X_POINTS, "fair-jain")
    frame.select_option("#fair-range", "6h")
    frame.wait_for_function(f"() => ({X_POINTS})('fair-jain') < {day}")
    assert frame.evaluate(X_POINTS, "fair-jain") <= 7  # hour buckets


def test_jobs_draws_and_follows_the_tenant_filter(staff_page, job_history, open_dashboard,  # type: ignore[no-untyped-def]
                                                  screenshot) -> None:
    frame = open_dashboard(staff_page, "jobs")
    drawn(frame, "jobs-jct", "jobs-queue", "jobs-gantt", "jobs-goodput")
    assert frame.evaluate(X_POINTS, "jobs-jct") == len(job_history.finished)
    hover = frame.evaluate("() => document.querySelector('#jobs-gantt .js-plotly-plot').data"
                           ".flatMap(t => t.hovertext || [])")
    assert any("preempted: GPUs reclaimed by tenant language" in text for text in hover)
    screenshot(staff_page, "jobs")
    labels = frame.evaluate(Y_LABELS, "jobs-gantt")
    assert {label.rsplit("(", 1)[1] for label in labels} == {"language)", "vision)"}
    frame.select_option("#jobs-tenant", "language")
    frame.wait_for_function(f"() => ({Y_LABELS})('jobs-gantt').every(l => l.endsWith('(language)'))")
    frame.wait_for_function(f"() => ({X_POINTS})('jobs-jct') === {len(job_history.finished) // 2}")
    frame.wait_for_function("() => [...document.querySelectorAll('#jobs-job option')].some(o => o.value)")
    assert all("(language," in label for label in options(frame, "jobs-job"))
    title = "() => document.querySelector('#jobs-goodput .js-plotly-plot').layout.title.text"
    frame.wait_for_function(f"() => ({title})().endsWith('(language)')")
    drawn(frame, "jobs-goodput")


def test_a_what_if_runs_from_the_page_to_its_comparison(staff_page, job_history, open_dashboard,  # type: ignore[no-untyped-def]
                                                        screenshot, eager_celery, settings, tmp_path) -> None:
    settings.VAR_DIR = tmp_path  # the history trace is written here
    frame = open_dashboard(staff_page, "energy")
    assert "No what-if yet" in frame.locator("#energy-progress").inner_text()
    frame.select_option("#energy-policy", "fifo")
    frame.locator("#energy-powerdown input").check()
    frame.fill("#energy-spares", "0")
    frame.fill("#energy-pue", "1.2")
    # A slider per GPU type of the inventory (A100, V100), none for the others; the A100s capped one step harder.
    assert frame.locator("#energy-cap-col-a100").is_visible() and frame.locator("#energy-cap-col-v100").is_visible()
    assert not frame.locator("#energy-cap-col-t4").is_visible()
    frame.locator("#energy-cap-col-a100 [role=slider]").press("ArrowLeft")
    frame.wait_for_function("() => document.querySelector('#energy-cap-watts').innerText.includes('a100 400 → 300 W')")
    frame.click("#energy-run")
    frame.wait_for_selector(".sweep-finished", timeout=120_000)
    frame.wait_for_function("() => document.querySelector('#energy-tradeoff .js-plotly-plot').layout.meta === 'drawn'")
    drawn(frame, "energy-tradeoff", "energy-scatter", "energy-tenants", "energy-tenant-energy")
    assert "Started" in frame.locator("#energy-message").inner_text()
    progress = frame.locator("#energy-progress").inner_text()
    assert progress.count("succeeded") == 2 and "baseline" in progress and "power-down 0" in progress
    assert "caps a100 0.75, v100 0.8" in progress
    stats = frame.locator("#energy-stats").inner_text().lower()
    assert "facility energy" in stats and "vs baseline" in stats and "p99 jct" in stats
    assert "done" in frame.locator("#energy-past-table tbody tr").first.inner_text()
    tenants = frame.evaluate("() => document.querySelector('#energy-tenants .js-plotly-plot').data[0].x")
    assert tenants == ["language", "vision"]
    energy = frame.evaluate("() => document.querySelector('#energy-tenant-energy .js-plotly-plot').data[0].x")
    assert energy == ["language", "vision", "no tenant (idle GPUs)"]
    screenshot(staff_page, "energy")


def test_tenant_user_sees_only_their_tenant_on_these_pages(tenant_page, open_dashboard,  # type: ignore[no-untyped-def]
                                                           screenshot) -> None:
    frame = open_dashboard(tenant_page, "fairness")
    titles = frame.locator("#fair-shares .annotation-text").all_text_contents()
    assert [t.split(" ")[0] for t in titles if "quota" in t] == ["vision"]
    pending = options(frame, "fair-pending-job")
    assert pending and all("(vision," in label for label in pending)
    holders = frame.locator("#fair-holders tbody tr").all_inner_texts()
    assert all("another tenant's job" in row or "\tvision\t" in row for row in holders)
    screenshot(tenant_page, "fairness-tenant")
    frame = open_dashboard(tenant_page, "jobs")
    assert all(label.endswith("(vision)") for label in frame.evaluate(Y_LABELS, "jobs-gantt"))
    assert options(frame, "jobs-tenant") == ["all tenants you see", "vision"]
    assert all("(vision," in label for label in options(frame, "jobs-job"))
    frame = open_dashboard(tenant_page, "energy")
    assert frame.locator("#energy-run").is_disabled()
    screenshot(tenant_page, "energy-tenant")


def test_the_progress_bar_follows_the_runs_until_the_comparison(staff_page, job_history, open_dashboard,  # type: ignore[no-untyped-def]
                                                                settings, tmp_path) -> None:
    """No worker here: the page polls while the test itself plays the worker, step by step."""
    settings.VAR_DIR = tmp_path
    frame = open_dashboard(staff_page, "energy")
    frame.click("#energy-run")
    frame.wait_for_selector(".sweep-running")
    assert frame.locator("#energy-progress").inner_text().count("queued") == 2
    sweep = WhatIfSweep.objects.get()
    baseline, what_if = sweep.runs.order_by("pk")
    WhatIfRun.objects.filter(pk=baseline.pk).update(status=WhatIfStatus.RUNNING, progress=0.4)
    frame.wait_for_function("() => document.querySelector('#energy-progress').innerText.includes('40%')")
    for run in (baseline, what_if):
        WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfStatus.QUEUED)
        assert whatif.execute_run(run.pk)
    whatif.compare_sweep(sweep.pk)
    frame.wait_for_selector(".sweep-finished", timeout=10_000)
    frame.wait_for_function("() => document.querySelector('#energy-tradeoff .js-plotly-plot').layout.meta === 'drawn'")
    drawn(frame, "energy-tradeoff", "energy-scatter", "energy-tenants")


def test_fairness_shows_borrowing_in_the_first_hour(staff_page, dashboard_data, open_dashboard,  # type: ignore[no-untyped-def]
                                                    screenshot) -> None:
    """No job hour is rolled up yet (a cluster minutes old): the running jobs' GPUs show as held, a tenant over
    its quota as borrowing, and Jain's index is drawn, at once."""
    from scheduler.models import Allocation, Tenant
    from telemetry.models import JobUsageHour
    JobUsageHour.objects.all().delete()
    held = Allocation.objects.filter(ended_at__isnull=True, job__tenant__name="language").count()
    assert held > 1
    Tenant.objects.filter(name="language").update(gpu_quota=held - 1)
    frame = open_dashboard(staff_page, "fairness")
    drawn(frame, "fair-shares", "fair-borrowed", "fair-jain")
    borrowed = dict(frame.evaluate("""() => document.querySelector('#fair-borrowed .js-plotly-plot').data
      .map(t => [t.name, t.y[t.y.length - 1]])"""))
    # The GPU-hours above quota so far this hour: what a report of the same minutes says (within a few seconds).
    hour = floor(timezone.now(), HOURS.width)
    report = held_over_time(hour, timezone.now(), {"language": held - 1})["language"].borrowed_gpu_seconds / 3600
    assert borrowed["language"] == pytest.approx(report, abs=0.01) and borrowed["language"] > 0
    for chart in ("fair-borrowed", "fair-jain"):  # one hour's point on an axis an hour wide, not a millisecond
        width = frame.evaluate(f"""() => {{ const axis = document.querySelector('#{chart} .js-plotly-plot')
          ._fullLayout.xaxis; return axis.r2l(axis.range[1]) - axis.r2l(axis.range[0]); }}""")
        assert width >= 3_600_000, (chart, width)
    screenshot(staff_page, "fairness-first-hour")


@pytest.mark.parametrize(("control", "typed"), [("#energy-days", "-3"), ("#energy-days", "100000"),
                                                ("#energy-pue", ""), ("#energy-load", "1e9")])
def test_a_bad_or_empty_box_is_refused_by_name_not_run_with_its_default(  # type: ignore[no-untyped-def]
        staff_page, job_history, open_dashboard, control, typed) -> None:
    """Failure 8: the browser blanks a number out of its box's range, and the page ran with the default unsaid."""
    frame = open_dashboard(staff_page, "energy")
    frame.fill(control, typed)
    frame.click("#energy-run")
    frame.wait_for_function("() => document.querySelector('#energy-message').innerText.includes('Not started')")
    field = {"#energy-days": "days", "#energy-pue": "pue", "#energy-load": "load_factor"}[control]
    assert f"{field}:" in frame.locator("#energy-message").inner_text()
    assert not WhatIfSweep.objects.exists()
