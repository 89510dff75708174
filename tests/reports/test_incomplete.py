"""Reports that say what they cover: a period still running, or with data for only part of it,
is marked incomplete on every format, its rates are over the hours covered, it recommends nothing, its usage chart
draws what its text counts; the list shows every report's period; the accounting CSV has exact GPU-hours."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta

import pytest
from django.test import Client

from cluster_ops.reports import periods, render, services
from cluster_ops.reports.charts import draw_charts
from cluster_ops.reports.content import build_content
from cluster_ops.reports.models import ReportStatus
from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.models import Job, JobState, Node, Tenant
from telemetry.rollups import roll_up_hours, roll_up_minutes
from tests.telemetry.readings_helpers import T0, allocate, at, ingest, reading

from .test_files import needs_pdftotext, pdf_text
from .week import Week

pytestmark = pytest.mark.django_db

EIGHT, NOW = 8 * 3600, 9.5 * 3600  # the cluster's first job at 08:00; the report made at 09:30 the same day


@pytest.fixture
def morning(node: Node, tenant: Tenant) -> periods.Period:
    """A cluster whose first job started at 08:00 on 2 of its 4 GPUs, sampled every 30 s until 09:30."""
    job = verbs.submit_job(tenant=tenant, name="early", workload_profile="cifar10", total_work=1,
                                        submitted_at=at(EIGHT))
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=at(EIGHT))
    allocate(job, "GPU-node1-0", EIGHT)
    allocate(job, "GPU-node1-1", EIGHT)
    for t in range(EIGHT, int(NOW), 30):
        ingest(*(reading(t, f"GPU-node1-{i}", gpu_util=90 if i < 2 else 0, power_w=300) for i in range(4)))
    roll_up_minutes(at(NOW))
    roll_up_hours(at(NOW))
    return periods.days(periods.CUSTOM, T0.date(), T0.date())


def test_a_running_period_covers_what_has_been(morning: periods.Period) -> None:
    content = build_content(morning, None, at(NOW))
    coverage = content.coverage
    assert not coverage.complete and (coverage.start, coverage.end) == (at(EIGHT), at(NOW))
    kpi = {k.key: k.value for k in content.kpis}
    assert kpi["gpu_hours"] == pytest.approx(3.0, abs=0.02)  # 2 GPUs × 1.5 h, the running half hour included
    # Over the 1.5 hours covered, not the day's 24: half the cluster's 4 GPUs.
    assert kpi["allocation"] == pytest.approx(50, abs=1)
    assert content.recommendations == [] and "incomplete" in (content.withheld or "")
    assert any(note.startswith("Incomplete: the period runs until") for note in content.notes)
    assert [round(p.gpu_hours(timedelta(hours=1)), 1) for p in content.usage] == [2.0, 1.0]


def test_every_format_says_incomplete(morning: periods.Period) -> None:
    content = build_content(morning, None, at(NOW))
    assert render.title(content).endswith("(incomplete)")
    html = render.render_html(content, draw_charts(content))
    assert "Incomplete period." in html and "1.5 of its 24 hours" in html
    rows = list(csv.reader(io.StringIO(render.render_csv(content))))
    assert ["coverage", "cluster", "complete", "no", "", ""] in rows
    stored = render.summary(content, content.notes)
    assert stored["complete"] is False and stored["withheld"]
    subject, text, mail_html = render.render_email(stored, ["r.pdf"], "http://x/reports/")
    assert subject.endswith("(incomplete)") and "Incomplete: the period runs until" in text
    assert "Incomplete" in mail_html


def test_the_usage_chart_draws_the_hours_it_counts(morning: periods.Period) -> None:
    """Two points (08:00, the running 09:00): drawn as steps to 09:30, not an empty chart."""
    content = build_content(morning, None, at(NOW))
    chart = draw_charts(content)["usage"]
    assert chart.error is None and chart.png
    import numpy as np
    from PIL import Image
    pixels = np.asarray(Image.open(io.BytesIO(chart.png)).convert("RGB")).reshape(-1, 3)
    green = ((pixels[:, 1] > 120) & (pixels[:, 0] < 90) & (pixels[:, 2] < 120)).sum()  # the busy area
    assert green > 2000


def test_a_complete_period_with_too_little_telemetry_recommends_nothing(week: Week, made_at: datetime) -> None:
    from telemetry.models import GpuHour
    GpuHour.objects.filter(start__gte=week.period.start + timedelta(days=3)).delete()
    content = build_content(week.period, None, made_at)
    assert content.coverage.complete and content.recommendations == []
    assert content.withheld and "telemetry covers 72 of the period's 168 hours" in content.withheld


def test_a_complete_period_recommends_with_its_figures(week: Week, made_at: datetime) -> None:
    content = build_content(week.period, None, made_at)
    assert content.coverage.complete and content.withheld is None and content.notes == []
    quota = [r.text for r in content.recommendations if r.kind == "quota"]
    assert quota and all("of the 168 hours" in text for text in quota)


def test_accounting_has_exact_gpu_hours_per_tenant_and_user(week: Week, made_at: datetime) -> None:
    report = services.make_report(week.period, None, now=made_at)
    assert report.status == ReportStatus.READY
    rows = list(csv.DictReader(io.StringIO(report.accounting.read().decode())))
    hours = {(r["tenant"], r["user"]): (int(r["jobs"]), float(r["gpu_hours"])) for r in rows}
    assert hours == {
        ("language", ""): (1, 20.0), ("language", "bob"): (1, 20.0),
        ("research", ""): (1, 336.0), ("research", "dave"): (1, 336.0),  # r1: 2 GPUs all week (started before)
        ("vision", ""): (2, 50.0), ("vision", "alice"): (1, 40.0), ("vision", "carol"): (1, 10.0),
    }
    assert all(r["complete"] == "yes" for r in rows)
    tenant_only = services.make_report(week.period, week.vision, now=made_at)
    assert {r["tenant"] for r in csv.DictReader(io.StringIO(tenant_only.accounting.read().decode()))} == {"vision"}


def test_the_list_shows_every_reports_period(week: Week, made_at: datetime, operator_client: Client) -> None:
    services.make_report(week.period, None, now=made_at)
    page = operator_client.get("/reports/").content.decode()
    assert f"<td>{week.period.label}</td>" in page and "accounting</a>" in page


def test_a_days_chart_has_no_tick_on_the_next_day(week: Week, made_at: datetime) -> None:
    """The x axis ends a second before the period: no "2026-Dec-02" tick under the report of Dec 1."""
    from matplotlib.dates import num2date

    from cluster_ops.reports.charts import usage_figure
    day = periods.days(periods.DAILY, week.T.date(), week.T.date())
    ticks = [num2date(t) for t in usage_figure(build_content(day, None, made_at)).axes[0].get_xticks()]
    assert ticks and all(day.start <= t < day.end for t in ticks), ticks


@needs_pdftotext
def test_the_pdf_says_incomplete(morning: periods.Period) -> None:
    report = services.make_report(morning, None, now=at(NOW))
    text = pdf_text(report)
    assert "Incomplete period." in text and "Incomplete: the period runs until" in text


def test_a_period_before_the_clusters_first_data_says_so_not_a_zero_length_span(tenant: Tenant) -> None:
    """Failure 13: yesterday's report said "covers 2026-12-05 00:00 – 00:00 (0.0 of 24 hours)"."""
    from cluster_ops.reports.content import coverage_of

    first = at(0)  # the cluster's first data: an allocation today
    inventory.register_node("n9", [inventory.GpuSpec(0, "GPU-n9-0", "NVIDIA A100-SXM4-80GB",
                                                                       81920, 400)])
    job = verbs.submit_job(tenant=tenant, name="j", workload_profile="cifar10", total_work=1.0,
                                        submitted_at=first)
    allocate(job, "GPU-n9-0", 0)
    midnight = first.replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday = periods.Period(periods.DAILY, midnight - timedelta(days=1), midnight)
    note = coverage_of(yesterday, first + timedelta(hours=2)).note(first + timedelta(hours=2))
    assert note is not None and note.startswith("No data") and "0.0 of" not in note
