"""A report's files and e-mail: the HTML report and its PDF (WeasyPrint), the CSV, and the e-mail body.

The HTML report is self-contained (charts as ``data:`` PNG images, CSS inline) and WeasyPrint renders it without
the network: its URL fetcher refuses anything but ``data:`` URLs. The e-mail body is rendered from the summary a
report stores (``summary``), so a delivery retried hours later needs no recomputation.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string

from cluster_ops.templatetags.report_format import num

from .charts import Chart
from .content import EMPTY_NOTE, Kpi, ReportContent


def report_context(content: ReportContent, charts: dict[str, Chart]) -> dict[str, Any]:
    return {"c": content, "charts": charts, "kind": content.period.kind, "title": title(content),
            "kpi_rows": [kpi_row(k) for k in content.kpis], "k": {k.key: k.value for k in content.kpis},
            "power": content.power, "idle_util": settings.TELEMETRY_IDLE_UTIL, "empty_note": EMPTY_NOTE}


def title(content: ReportContent) -> str:
    incomplete = "" if content.coverage.complete else " (incomplete)"
    return f"Cluster Ops {content.period.kind} report · {content.scope} · {content.period.label}{incomplete}"


def render_html(content: ReportContent, charts: dict[str, Chart]) -> str:
    return render_to_string("reports/report.html", report_context(content, charts))


def render_pdf(html: str) -> bytes:
    """The PDF of a report's HTML; only ``data:`` URLs are fetched (the charts): nothing leaves the machine."""
    from weasyprint import HTML  # imported here: pango loads on first use, not at Django start-up
    from weasyprint.urls import URLFetcher

    pdf: bytes = HTML(string=html, url_fetcher=URLFetcher(allowed_protocols={"data"})).write_pdf()
    return pdf


def kpi_row(kpi: Kpi) -> dict[str, str]:
    change = kpi.change
    return {"key": kpi.key, "label": kpi.label, "unit": kpi.unit, "value": num(kpi.value, kpi.digits),
            "previous": num(kpi.previous, kpi.digits), "change": "–" if change is None else f"{change:+.0%}"}


def render_csv(content: ReportContent) -> str:
    """One long table: section, subject, metric, value, previous, unit (previous only where compared)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["section", "subject", "metric", "value", "previous", "unit"])
    scope = content.tenant or "cluster"
    coverage = content.coverage
    writer.writerow(["coverage", scope, "complete", "yes" if coverage.complete else "no", "", ""])
    writer.writerow(["coverage", scope, "covered from", coverage.start.isoformat(), "", ""])
    writer.writerow(["coverage", scope, "covered until", coverage.end.isoformat(), "", ""])
    writer.writerow(["coverage", scope, "hours covered", _cell(coverage.hours), _cell(coverage.period.hours), "h"])
    writer.writerow(["coverage", scope, "hours with telemetry", _cell(coverage.telemetry_hours), "", "h"])
    for kpi in content.kpis:
        writer.writerow(["summary", scope, kpi.label, _cell(kpi.value), _cell(kpi.previous), kpi.unit])
    for row in content.tenants:
        for metric, value, unit in (
            ("quota", row.quota, "GPUs"), ("GPU-hours allocated", row.gpu_hours, "GPU-h"),
            ("average GPUs held", row.avg_gpus, "GPUs"), ("quota use", row.quota_use, "fraction"),
            ("GPU-hours borrowed", row.borrowed_gpu_hours, "GPU-h"),
            ("hours over quota", row.over_quota_hours, "fraction"),
            ("hours under half quota", row.under_quota_hours, "fraction"),
            ("GPU-hours idle-allocated", row.idle_gpu_hours, "GPU-h"), ("GPU energy", row.it_kwh, "kWh"),
            ("facility energy", row.facility_kwh, "kWh"), ("CO2", row.co2_kg, "kg"),
            ("energy cost", row.cost, content.currency),
            ("jobs succeeded", row.jobs_succeeded, "jobs"), ("jobs failed", row.jobs_failed, "jobs"),
        ):
            previous = row.previous_gpu_hours if metric == "GPU-hours allocated" else None
            writer.writerow(["tenant", row.name, metric, _cell(value), _cell(previous), unit])
    if content.unheld_kwh is not None:
        writer.writerow(["energy", "GPUs held by no job", "GPU energy", _cell(content.unheld_kwh), "", "kWh"])
    if content.energy_modelled:
        writer.writerow(["energy", scope, "modelled", "yes", "", ""])
    for user in content.top_users:
        writer.writerow(["top users", f"{user.owner or '(no owner)'} ({user.tenant})", "GPU-hours allocated",
                         _cell(user.gpu_hours), "", "GPU-h"])
    for job in content.idle_jobs:
        writer.writerow(["idle jobs", f"{job.job} #{job.job_id} ({job.tenant})", "GPU-hours idle-allocated",
                         _cell(job.idle_allocated_gpu_hours), "", "GPU-h"])
    for node in content.downtime:
        writer.writerow(["downtime", node.node, "hours with a GPU down", _cell(node.down_hours), "", "h"])
        writer.writerow(["downtime", node.node, "GPU-hours down", _cell(node.lost_gpu_hours), "", "GPU-h"])
    for rec in content.recommendations:
        writer.writerow(["recommendation", rec.subject, rec.kind, rec.text, "", ""])
    return out.getvalue()


ACCOUNTING_HEADER = ["tenant", "user", "jobs", "gpu_hours", "period_start", "period_end", "complete"]


def render_accounting(content: ReportContent) -> str:
    """Exact GPU-hours per tenant (user empty: its total) and per user, as ``sreport`` gives accounts: one row
    each, GPU-hours to the second (6 decimals), with the part of the period covered."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(ACCOUNTING_HEADER)
    coverage = content.coverage
    for account in content.accounts:
        writer.writerow([account.tenant, account.owner, account.jobs, f"{account.gpu_hours:.6f}",
                         coverage.start.isoformat(), coverage.end.isoformat(), "yes" if coverage.complete else "no"])
    return out.getvalue()


def _cell(value: float | int | None) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def summary(content: ReportContent, notes: list[str]) -> dict[str, Any]:
    """What the e-mail body and the report list show, stored with the report (JSON)."""
    return {
        "title": title(content), "scope": content.scope, "period": content.period.label,
        "previous": content.period.previous.label, "empty": content.empty, "notes": notes,
        "complete": content.coverage.complete, "hours_covered": round(content.coverage.hours, 2),
        "withheld": content.withheld,
        "kpis": [kpi_row(k) for k in content.kpis], "recommendations": [asdict(r) for r in content.recommendations],
    }


def render_email(stored: dict[str, Any], attachments: list[str], list_url: str) -> tuple[str, str, str]:
    """(subject, text body, HTML body) of a report's e-mail, from its stored ``summary``."""
    context = {"s": stored, "attachments": attachments, "url": list_url, "site": settings.PUBLIC_URL}
    return (stored.get("title", "Cluster Ops report"), render_to_string("reports/email.txt", context),
            render_to_string("reports/email.html", context))
