"""Browser tests: Playwright (sync API) driving Debian's Chromium against pytest-django's live server.

Fixtures for every dashboard test:

* ``dashboard_data`` — a small cluster seeded by ``cluster_ops.dashboards.seed`` (16 GPUs, 2 days,
  60 finished jobs, running and pending ones, rollups, raw samples of the last minutes);
* ``staff_user`` / ``tenant_user`` (a member of ``vision`` only) and ``staff_page`` / ``tenant_page``:
  Playwright pages logged in through the real login form. After the test they fail it if any
  request left localhost (the dashboards must work offline), any response was a 5xx, or plotly.js's
  full bundle was loaded instead of our cartesian one;
* ``open_dashboard(page, slug)`` → the Dash iframe's ``Frame``, once every chart in it is drawn;
* ``wait_for_charts(frame)``, ``chart_meta(frame, graph_id)``, ``chart_traces(frame, graph_id)``;
* ``screenshot(page, name)`` → a full-page PNG under ``test-artifacts/``.

Playwright's sync API keeps an asyncio loop in the main thread, so Django's async-safety check
must be off in this process (``DJANGO_ALLOW_ASYNC_UNSAFE``). Without ``/usr/bin/chromium`` the
tests here fail saying what to install (``tests/prerequisites.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cluster_ops.dashboards import seed
from scheduler.models import Tenant
from tests.prerequisites import CHROMIUM

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "pw-browser-1234"
CHART_TIMEOUT_MS = 30_000

# True once every chart in the document is drawn: each .js-plotly-plot has its SVG and a figure that is no longer
# the "pending" placeholder (common.graph), and no Dash component is still loading.
CHARTS_DRAWN = """() => {
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  return plots.length > 0
    && plots.every(p => p.querySelector('.main-svg') && p.layout && p.layout.meta !== 'pending')
    && !document.querySelector('[data-dash-is-loading="true"]');
}"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.needs("browser"))


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's launch arguments: Debian's Chromium, never a downloaded browser."""
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS, "headless": True}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": {"width": 1366, "height": 768}}


@pytest.fixture
def dashboard_data(transactional_db: None) -> dict:
    return seed.seed(gpus=16, days=2, jobs=60, now=timezone.now(), seed=7)


@pytest.fixture
def staff_user(transactional_db: None) -> User:
    return User.objects.create_user("ops", password=PASSWORD, is_staff=True, is_superuser=True)


@pytest.fixture
def tenant_user(dashboard_data: dict) -> User:
    user = User.objects.create_user("vision-member", password=PASSWORD)
    Tenant.objects.get(name="vision").members.add(user)
    return user


def log_in(page, base_url: str, username: str, password: str = PASSWORD) -> None:  # type: ignore[no-untyped-def]
    """Log in through the real login form."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def plotly_warned(kind: str, text: str) -> bool:
    """Whether a console message is one of plotly.js's warnings, which it logs with ``console.trace`` (an invalid
    colour, an axis it cannot draw) and Chromium therefore reports as a trace, not a warning."""
    return kind == "trace" and text.startswith(("WARN:", "ERROR:"))


def _guarded(page, base_url: str) -> Iterator:  # type: ignore[no-untyped-def]
    """Yield ``page``; afterwards fail if a request left the live server's host, a response was a 5xx, the console
    logged an error or a warning (the page's or its frames', plotly.js's own included; a 404, /favicon.ico's too, is
    one), or a page loaded
    plotly.js's full bundle (the charts must draw with our cartesian one: ``dashboards.common.SCRIPTS``)."""
    host = urlsplit(base_url).hostname
    outside: list[str] = []
    failures: list[str] = []
    full_plotly: list[str] = []
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text} ({m.location.get('url', '')})")
            if m.type in ("error", "warning") or plotly_warned(m.type, m.text) else None)
    page.on("pageerror", lambda e: console.append(f"uncaught: {e}"))
    page.on("request", lambda r: outside.append(r.url)
            if r.url.startswith("http") and urlsplit(r.url).hostname != host else None)
    page.on("request", lambda r: full_plotly.append(r.url) if r.url.endswith("/plotly.min.js") else None)
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    yield page
    assert outside == [], f"requests left {host}: {outside}"
    assert failures == [], f"server errors: {failures}"
    assert full_plotly == [], f"plotly.js's full bundle was loaded: {full_plotly}"
    assert console == [], f"the console logged: {console}"


@pytest.fixture
def staff_page(page, live_server, staff_user: User) -> Iterator:  # type: ignore[no-untyped-def]
    log_in(page, live_server.url, staff_user.username)
    yield from _guarded(page, live_server.url)


@pytest.fixture
def tenant_page(page, live_server, tenant_user: User) -> Iterator:  # type: ignore[no-untyped-def]
    log_in(page, live_server.url, tenant_user.username)
    yield from _guarded(page, live_server.url)


def wait_for_charts(frame, timeout_ms: int = CHART_TIMEOUT_MS) -> None:  # type: ignore[no-untyped-def]
    frame.wait_for_function(CHARTS_DRAWN, timeout=timeout_ms)


def dashboard_frame(page):  # type: ignore[no-untyped-def]
    """The Dash app's frame inside the current dashboard page."""
    handle = page.wait_for_selector(".dashboard-frame iframe", state="attached")
    frame = handle.content_frame()
    frame.wait_for_load_state()
    return frame


@pytest.fixture
def open_dashboard(live_server) -> Callable:  # type: ignore[no-untyped-def]
    """``open_dashboard(page, slug)``: navigate to /dash/<slug>/, wait for every chart; returns the iframe's Frame."""

    def open_(page, slug: str):  # type: ignore[no-untyped-def]
        page.goto(f"{live_server.url}/dash/{slug}/")
        frame = dashboard_frame(page)
        wait_for_charts(frame)
        return frame

    return open_


def chart_meta(frame, graph_id: str) -> str:  # type: ignore[no-untyped-def]
    """The figure's ``layout.meta``: "drawn" (common.styled), "empty" (common.empty_figure) or "pending"."""
    return frame.evaluate("id => document.getElementById(id).querySelector('.js-plotly-plot').layout.meta",
                          graph_id)


def chart_traces(frame, graph_id: str) -> int:  # type: ignore[no-untyped-def]
    """How many traces the chart draws (a trace with no points counts 0)."""
    return frame.evaluate("""id => {
      const plot = document.getElementById(id).querySelector('.js-plotly-plot');
      return (plot.data || []).filter(t => ['x', 'y', 'z'].some(k => t[k] && t[k].length)).length;
    }""", graph_id)


@pytest.fixture
def screenshot() -> Callable:  # type: ignore[no-untyped-def]
    """``screenshot(page, name)``: a full-page PNG at ``test-artifacts/<name>.png`` (once the iframe has grown)."""

    def take(page, name: str) -> Path:  # type: ignore[no-untyped-def]
        page.wait_for_function("""() => {
          const holder = document.querySelector('.dashboard-frame > div');
          const frame = holder && holder.querySelector('iframe');
          const root = frame && frame.contentDocument && frame.contentDocument.getElementById('react-entry-point');
          return !root || Math.abs(holder.offsetHeight - Math.max(400, root.scrollHeight + 16)) <= 4;
        }""", timeout=10_000)
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
