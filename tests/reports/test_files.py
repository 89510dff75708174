"""Making a report: its files (the PDF read back with pdftotext), replacing on a re-run, a failing chart, an empty
period, the command."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from cluster_ops.reports import charts, periods, services
from cluster_ops.reports.models import Report, ReportStatus

from .week import Week

needs_pdftotext = pytest.mark.needs("pdf")


def pdf_text(report: Report) -> str:
    out = subprocess.run(["pdftotext", "-layout", report.pdf.path, "-"], capture_output=True, check=True, text=True)
    return out.stdout


CLUSTER_SECTIONS = ["Summary", "Recommendations", "Usage", "Tenants: quota, use and borrowing", "Idle GPUs",
                    "Fairness", "Jobs", "Energy", "Top users", "Failures and downtime", "Definitions"]


@needs_pdftotext
def test_the_pdf_opens_and_has_its_sections_in_order(week: Week, made_at: datetime) -> None:
    report = services.make_report(week.period, None, now=made_at)
    assert report.status == ReportStatus.READY and report.notes == []
    assert report.pdf.read(5) == b"%PDF-"
    text = pdf_text(report)
    found = [re.search(rf"^\f?{re.escape(heading)}$", text, re.MULTILINE) for heading in CLUSTER_SECTIONS]
    assert None not in found, [h for h, m in zip(CLUSTER_SECTIONS, found, strict=True) if m is None]
    positions = [m.start() for m in found if m]
    assert positions == sorted(positions)
    assert "Cluster Ops weekly report" in text and week.period.label in text
    assert "406.0" in text and "336.0" in text  # GPU-hours allocated, and research's
    assert "Cap GPU power at 80%" in text
    info = subprocess.run(["pdfinfo", report.pdf.path], capture_output=True, text=True, check=True).stdout
    assert int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:"))) >= 2


def test_html_and_csv_files(week: Week, made_at: datetime) -> None:
    report = services.make_report(week.period, None, now=made_at)
    html = report.html.read().decode()
    assert html.count('src="data:image/png;base64,') == 4  # usage, tenants, energy, waits: embedded, no URLs
    assert "http://" not in html and "https://" not in html
    rows = list(csv.DictReader(io.StringIO(report.csv.read().decode())))
    allocated = next(r for r in rows if r["section"] == "summary" and r["metric"] == "GPU-hours allocated")
    assert (float(allocated["value"]), float(allocated["previous"])) == (406, 68)
    research = {r["metric"]: r["value"] for r in rows if r["section"] == "tenant" and r["subject"] == "research"}
    assert float(research["GPU-hours borrowed"]) == 168
    assert Path(report.pdf.path).name == f"weekly-{week.T:%Y-%m-%d}-cluster.pdf"


def test_running_a_period_again_replaces_the_report(week: Week, made_at: datetime) -> None:
    first = services.make_report(week.period, week.vision, now=made_at)
    old_files = {Path(first.pdf.path), Path(first.csv.path), Path(first.html.path), Path(first.accounting.path)}
    again = services.make_report(week.period, week.vision, now=made_at + timedelta(hours=1))
    assert again.pk == first.pk and Report.objects.count() == 1
    assert again.made_at == made_at + timedelta(hours=1)
    assert {Path(again.pdf.path), Path(again.csv.path), Path(again.html.path),
            Path(again.accounting.path)} == old_files  # same names, no copies
    assert sorted(p.name for p in Path(again.pdf.path).parent.iterdir()) == sorted(p.name for p in old_files)
    services.make_report(week.period, None, now=made_at)  # the cluster-wide one is another report
    assert Report.objects.count() == 2


def test_a_failing_chart_keeps_the_report_and_says_why(week: Week, made_at: datetime,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(content: object) -> bytes:
        raise RuntimeError("no fonts today")

    monkeypatch.setattr(charts, "CHARTS", [(key, title, broken if key == "energy" else draw, scope)
                                           for key, title, draw, scope in charts.CHARTS])
    report = services.make_report(week.period, None, now=made_at)
    assert report.status == ReportStatus.READY
    assert report.notes == ["Energy per tenant: the chart could not be drawn (RuntimeError: no fonts today)"]
    html = report.html.read().decode()
    assert "could not be drawn (RuntimeError: no fonts today)" in html
    assert html.count('src="data:image/png;base64,') == 3  # the other charts are there
    if shutil.which("pdftotext"):
        assert "could not be drawn" in pdf_text(report)


def test_a_failure_is_recorded_and_earlier_files_kept(week: Week, made_at: datetime,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    report = services.make_report(week.period, None, now=made_at)
    monkeypatch.setattr(services, "build_content", lambda *a: (_ for _ in ()).throw(ValueError("database gone")))
    failed = services.make_report(week.period, None, now=made_at)
    assert (failed.status, failed.error) == (ReportStatus.FAILED, "ValueError: database gone")
    assert failed.pdf.name == report.pdf.name and Path(failed.pdf.path).exists()


@needs_pdftotext
def test_an_empty_period_says_so(week: Week, made_at: datetime) -> None:
    day = (week.T - timedelta(days=60)).date()
    report = services.make_report(periods.days(periods.DAILY, day, day), None, now=made_at)
    assert report.status == ReportStatus.READY and report.summary["empty"]
    assert "Nothing happened in this period" in pdf_text(report)
    assert report.notes[0].startswith("Nothing happened in this period")


def test_the_command_makes_the_weekly_report_of_a_tenant(week: Week) -> None:
    out = io.StringIO()
    call_command("make_report", "--period", "weekly", "--tenant", "vision", stdout=out)
    report = Report.objects.get()
    assert (report.kind, report.tenant, report.period_start) == ("weekly", week.vision, week.period.start)
    assert report.status == ReportStatus.READY and "weekly report" in out.getvalue()
    last = week.period.last_day
    call_command("make_report", "--period", f"{week.T:%Y-%m-%d}..{last:%Y-%m-%d}", stdout=io.StringIO())
    assert Report.objects.filter(kind="custom", tenant=None).count() == 1


@pytest.mark.parametrize("args, message", [
    (["--period", "monthly"], "is not a period"),
    (["--period", "2026-11-20..2026-11-10"], "before it starts"),
    (["--period", "weekly", "--tenant", "nobody"], "no tenant 'nobody'"),
])
def test_the_command_names_what_is_wrong(week: Week, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("make_report", *args)
