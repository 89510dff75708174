"""Clickjacking: pages refuse every frame; only the Dash apps our pages embed allow our own origin."""

from __future__ import annotations

from django.test import Client


def test_pages_are_never_framed(operator_client: Client) -> None:
    assert operator_client.get("/").headers["X-Frame-Options"] == "DENY"
    assert operator_client.get("/admin/").headers["X-Frame-Options"] == "DENY"


def test_the_embedded_dash_apps_may_be_framed_by_our_pages_only(operator_client: Client) -> None:
    response = operator_client.get("/django_plotly_dash/app/overview/")
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "SAMEORIGIN"
