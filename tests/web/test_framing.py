"""The embedded Dash apps: framed only by our own pages; their callbacks checked for CSRF."""

from __future__ import annotations

from django.conf import settings
from django.test import Client


def test_pages_are_never_framed(operator_client: Client) -> None:
    assert operator_client.get("/").headers["X-Frame-Options"] == "DENY"
    assert operator_client.get("/admin/").headers["X-Frame-Options"] == "DENY"


def test_the_embedded_dash_apps_may_be_framed_by_our_pages_only(operator_client: Client) -> None:
    response = operator_client.get("/django_plotly_dash/app/overview/")
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "SAMEORIGIN"


def test_dash_callbacks_need_the_csrf_token(operator) -> None:
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)  # "{}" is no valid callback
    client.force_login(operator)
    url = "/django_plotly_dash/app/overview/_dash-update-component"
    assert client.post(url, data="{}", content_type="application/json").status_code == 403
    token = client.get("/").cookies[settings.CSRF_COOKIE_NAME].value  # what Dash's renderer sends back
    answer = client.post(url, data="{}", content_type="application/json", headers={"X-CSRFToken": token})
    assert answer.status_code != 403
