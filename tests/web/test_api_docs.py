"""The browsable API documentation (Swagger UI from local files) and the favicon."""

import re

from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client


def test_api_docs_page_is_served_from_local_files(operator_client: Client) -> None:
    response = operator_client.get("/api/docs/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and not [s for s in sources if s.startswith(("http:", "https:", "//"))], sources
    for source in sources:
        if source.startswith("/static/"):  # each file Swagger UI needs is one of ours
            assert finders.find(source.removeprefix("/static/").split("?")[0]), source
    # The page's script is a file (our CSP allows no inline script) and reads our schema.
    script = next(s for s in sources if "script" in s and s.startswith("/api/docs/"))
    assert "/api/schema/" in operator_client.get(script).content.decode()


def test_api_docs_need_login(client: Client, db: None) -> None:
    response = client.get("/api/docs/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_staff_navigation_links_the_api_docs(operator_client: Client, db: None) -> None:
    assert 'href="/api/docs/"' in operator_client.get("/reports/").content.decode()
    member = User.objects.create_user("member", password="pw-member-123")
    client = Client()
    client.force_login(member)
    assert 'href="/api/docs/"' not in client.get("/reports/").content.decode()


def test_favicon(client: Client, db: None) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert finders.find(response["Location"].removeprefix("/static/"))
    assert 'rel="icon"' in client.get("/accounts/login/").content.decode()
