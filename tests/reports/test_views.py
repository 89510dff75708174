"""The reports page and downloads: login required, tenant users see only their tenants' reports, staff all."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from cluster_ops.reports import services, tasks
from cluster_ops.reports.models import Report, ReportDelivery, ReportRecipient, ReportStatus

from .conftest import login
from .week import Week


@pytest.fixture
def reports(week: Week, made_at: datetime) -> dict[str, Report]:
    return {name: services.make_report(week.period, tenant, now=made_at)
            for name, tenant in (("cluster", None), ("vision", week.vision), ("language", week.language))}


@pytest.fixture
def staff(db: None) -> Client:
    """An operator who may make and e-mail reports (``add_report``, ``send_report``), as in admin."""
    user = User.objects.create_user("ops", password="pw-ops-12345", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_report", "send_report"]))
    client = Client()
    client.force_login(user)
    return client


def url(report: Report, fmt: str) -> str:
    return f"/reports/{report.pk}/{fmt}/"


def test_anonymous_users_are_sent_to_log_in(client: Client, reports: dict[str, Report]) -> None:
    for target in ("/reports/", url(reports["vision"], "pdf"), url(reports["cluster"], "html")):
        response = client.get(target)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")


def test_tenant_users_see_and_download_only_their_tenants_reports(reports: dict[str, Report]) -> None:
    alice = login("alice")
    page = alice.get("/reports/").content.decode()
    assert url(reports["vision"], "pdf") in page
    assert url(reports["language"], "pdf") not in page and url(reports["cluster"], "pdf") not in page
    assert "language" not in page and "research" not in page and "whole cluster" not in page.split("<table")[1]
    response = alice.get(url(reports["vision"], "pdf"))
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"].startswith("attachment;")
    assert b"".join(response.streaming_content)[:5] == b"%PDF-"
    for other in (reports["language"], reports["cluster"]):
        for fmt in ("pdf", "html", "csv"):
            assert alice.get(url(other, fmt)).status_code == 404


def test_staff_see_and_download_every_report(staff: Client, reports: dict[str, Report]) -> None:
    page = staff.get("/reports/").content.decode()
    assert all(url(report, "pdf") in page for report in reports.values())
    html = staff.get(url(reports["cluster"], "html"))
    assert html.status_code == 200 and html["Content-Type"] == "text/html; charset=utf-8"
    assert html["Content-Security-Policy"] == "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    assert "inline" in html["Content-Disposition"]
    csv = staff.get(url(reports["language"], "csv"))
    assert csv.status_code == 200 and b"language" in b"".join(csv.streaming_content)
    assert staff.get(f"/reports/{reports['cluster'].pk}/exe/").status_code == 404
    assert staff.get("/reports/99999/pdf/").status_code == 404


@pytest.mark.usefixtures("eager_celery")
def test_a_tenant_user_makes_a_report_for_their_tenant(week: Week,
                                                       django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    alice = login("alice")
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post("/reports/", {"period": "weekly", "tenant": week.vision.pk})
    assert response.status_code == 302
    report = Report.objects.get()
    assert (report.tenant, report.kind, report.status, report.requested_by) == (
        week.vision, "weekly", ReportStatus.READY, week.users["alice"])
    refused = alice.post("/reports/", {"period": "weekly", "tenant": week.language.pk})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()
    assert alice.post("/reports/", {"period": "weekly"}).status_code == 400  # no cluster-wide reports for tenants
    assert "send" not in alice.get("/reports/").content.decode().split('id="make-report"')[1].split("</form>")[0]
    assert Report.objects.count() == 1


@pytest.mark.usefixtures("eager_celery")
def test_staff_make_a_custom_cluster_report_and_send_it(staff: Client, week: Week,
                                                        django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    ReportRecipient.objects.create(email="ops@example.com")
    data = {"period": "custom", "first_day": f"{week.T:%Y-%m-%d}", "last_day": f"{week.period.last_day:%Y-%m-%d}",
            "tenant": "", "send": "on"}
    with django_capture_on_commit_callbacks(execute=True):
        assert staff.post("/reports/", data).status_code == 302
    report = Report.objects.get()
    assert (report.kind, report.tenant, report.period_end) == ("custom", None, week.period.end)
    assert ReportDelivery.objects.get(report=report).status == "sent"
    backwards = {**data, "first_day": data["last_day"], "last_day": data["first_day"]}
    assert "before it starts" in staff.post("/reports/", backwards).content.decode()


def test_admin_lists_reports_recipients_and_deliveries(staff: Client, reports: dict[str, Report]) -> None:
    User.objects.filter(username="ops").update(is_superuser=True)
    for model in ("report", "reportrecipient", "reportdelivery"):
        assert staff.get(f"/admin/reports/{model}/").status_code == 200
    page = staff.get(f"/admin/reports/report/{reports['vision'].pk}/change/").content.decode()
    assert url(reports["vision"], "pdf") in page


def test_a_report_asked_for_while_the_broker_is_away_is_kept_and_sent_when_it_is_back(
        staff: Client, week: Week, monkeypatch, django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    """POST /reports/ answered 500 (kombu OperationalError) during a Redis restart, though the report was stored."""
    from kombu.exceptions import OperationalError

    def broker_away(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(tasks.make, "delay", broker_away)
    data = {"period": "custom", "first_day": f"{week.T:%Y-%m-%d}", "last_day": f"{week.period.last_day:%Y-%m-%d}",
            "tenant": ""}
    with django_capture_on_commit_callbacks(execute=True):
        assert staff.post("/reports/", data).status_code == 302
    report = Report.objects.get()
    assert report.status == ReportStatus.QUEUED and report.sent_at is None
    sent: list[int] = []
    monkeypatch.setattr(tasks.make, "delay", lambda pk, *rest: sent.append(pk))
    assert tasks.recover_reports(report.created_at)["resent"] == 1 and sent == [report.pk]
