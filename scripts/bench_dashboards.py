"""Browser benchmark of the dashboards: seconds from navigation until every chart of a page is drawn.

    .venv/bin/python manage.py seed_dashboard_data            # 1,024 GPUs, 30 days, 10,000 jobs (once)
    .venv/bin/python scripts/bench_dashboards.py [--runs 3] [--output var/bench/dashboards.json]

Against the configured database (``DATABASE_URL`` / ``VAR_DIR``, as ``manage.py``): collects the
static files, starts the web server as ``make run`` does (gunicorn, same workers), logs a staff
user in through the login form in headless Chromium (``/usr/bin/chromium``) and, for every page in
``cluster_ops.dashboards.pages.PAGES``, navigates once to warm up and ``--runs`` times timed; a
navigation ends when every chart in the page's Dash iframe is drawn (the same test as the browser
tests). Prints a table (median and worst of the timed runs, and the first, cold, load) and writes
JSON. Target: median ≤ 2 s per page.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TARGET_S = 2.0
# cluster_ops.dashboards.common.TIME_RANGES: the default, then the longest range drawn minute by minute and the
# longest of all, each timed as a switch from the default.
DEFAULT_RANGE, SWITCHED_RANGES = "24h", ("48h", "30d")
USERNAME = "dashboard-bench"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed navigations per page (default 3)")
    parser.add_argument("--output", type=Path, default=ROOT / "var" / "bench" / "dashboards.json")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (make run: 2)")
    parser.add_argument("--threads", type=int, default=1, help="threads per gunicorn worker (make run: 1)")
    args = parser.parse_args()
    import django

    django.setup()
    from cluster_ops.dashboards.pages import PAGES
    from scheduler.models import Gpu, Job

    facts = {"gpus": Gpu.objects.count(), "jobs": Job.objects.count()}
    password = bench_user()
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"], cwd=ROOT,
                   check=True)
    port = free_port()
    server = start_server(port, args.workers, args.threads)
    try:
        results = measure(f"http://127.0.0.1:{port}", password, [(p.slug, p.title) for p in PAGES], args.runs)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = {"at": datetime.now(UTC).isoformat(timespec="seconds"), **facts, "runs": args.runs,
              "server": f"gunicorn, {args.workers} workers × {args.threads} threads", "target_s": TARGET_S,
              "pages": results}
    print_table(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {args.output}")
    return 0


def bench_user() -> str:
    """A staff user for the benchmark with a fresh random password."""
    from django.contrib.auth.models import User

    password = secrets.token_urlsafe(16)
    user, _ = User.objects.get_or_create(username=USERNAME, defaults={"is_staff": True})
    user.is_staff = True
    user.set_password(password)
    user.save()
    return password


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int, workers: int, threads: int) -> subprocess.Popen:
    command = [str(Path(sys.executable).parent / "gunicorn"), "cluster_ops.wsgi", "--bind", f"127.0.0.1:{port}",
               "--workers", str(workers), "--threads", str(threads), "--no-control-socket"]
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
            return server
        except OSError:
            if server.poll() is not None:
                output = server.stderr.read() if server.stderr else ""
                raise SystemExit(f"{shlex.join(command)} exited: {output}") from None
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("the web server did not answer within 60 s")


def measure(base: str, password: str, pages: list[tuple[str, str]], runs: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    charts_drawn = _charts_drawn()
    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", USERNAME)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        updates = _DashUpdates(page)
        for slug, title in pages:
            times = [_navigate(page, f"{base}/dash/{slug}/", charts_drawn) for _ in range(runs + 1)]
            frame = page.wait_for_selector(".dashboard-frame iframe").content_frame()
            results.append(_row(slug, title, frame.locator(".js-plotly-plot").count(), times))
            for wanted in SWITCHED_RANGES:
                ranged = frame.locator(f"select:has(option[value='{wanted}'])")
                if not ranged.count():  # the page has no such time range
                    continue
                select = ranged.first.get_attribute("id")
                times = [_switch(page, frame, select, wanted, updates, charts_drawn) for _ in range(runs + 1)]
                results.append(_row(f"{slug}?{select}={wanted}", f"{title}, {wanted}",
                                    frame.locator(".js-plotly-plot").count(), times, after="filter change"))
        browser.close()
    return results


def _row(slug: str, title: str, charts: int, times: list[float], after: str = "navigation") -> dict:
    timed = times[1:]
    return {"slug": slug, "title": title, "charts": charts, "after": after, "cold_s": round(times[0], 2),
            "runs_s": [round(t, 2) for t in timed], "median_s": round(statistics.median(timed), 2),
            "max_s": round(max(timed), 2)}


class _DashUpdates:
    """Counts Dash callback requests started and finished, to know when a filter change has been answered."""

    def __init__(self, page) -> None:  # type: ignore[no-untyped-def]
        self.started = self.finished = 0
        page.on("request", lambda r: self._count(r, "started"))
        page.on("requestfinished", lambda r: self._count(r, "finished"))
        page.on("requestfailed", lambda r: self._count(r, "finished"))

    def _count(self, request, which: str) -> None:  # type: ignore[no-untyped-def]
        if "_dash-update-component" in request.url:
            setattr(self, which, getattr(self, which) + 1)


def _switch(page, frame, select: str, wanted: str, updates: _DashUpdates,  # type: ignore[no-untyped-def]
            charts_drawn: str) -> float:
    """Seconds from choosing another time range until its callbacks have answered and every chart is drawn."""
    frame.select_option(f"#{select}", DEFAULT_RANGE)
    _settle(page, frame, updates, charts_drawn, 0)
    before = updates.finished
    began = time.perf_counter()
    frame.select_option(f"#{select}", wanted)
    _settle(page, frame, updates, charts_drawn, before)
    return time.perf_counter() - began


def _settle(page, frame, updates: _DashUpdates, charts_drawn: str, before: int) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if updates.finished > before and updates.started == updates.finished and frame.evaluate(charts_drawn):
            return
        page.wait_for_timeout(10)
    raise SystemExit("a filter change was not answered within 120 s")


def _charts_drawn() -> str:
    """The browser tests' "every chart drawn" check (tests/browser/conftest.py), so both wait for the same thing."""
    text = (ROOT / "tests" / "browser" / "conftest.py").read_text()
    return text.split('CHARTS_DRAWN = """', 1)[1].split('"""', 1)[0]


def _navigate(page, url: str, charts_drawn: str) -> float:  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    page.goto(url)
    frame = page.wait_for_selector(".dashboard-frame iframe", state="attached").content_frame()
    frame.wait_for_function(charts_drawn, timeout=120_000)
    return time.perf_counter() - began


def print_table(report: dict) -> None:
    print(f"{report['gpus']:,} GPUs, {report['jobs']:,} jobs; {report['server']}; median of {report['runs']} "
          f"after a warm-up (target ≤ {report['target_s']} s)")
    print(f"{'page':<28} {'after':<15} {'charts':>6} {'median s':>9} {'max s':>7} {'first s':>8}  target")
    for row in report["pages"]:
        ok = "ok" if row["median_s"] <= report["target_s"] else "MISSED"
        print(f"{row['title']:<28} {row['after']:<15} {row['charts']:>6} {row['median_s']:>9.2f} "
              f"{row['max_s']:>7.2f} {row['cold_s']:>8.2f}  {ok}")


if __name__ == "__main__":
    raise SystemExit(main())
