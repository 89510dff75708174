"""A real Prometheus (Debian's) scrapes a running server's /metrics with the bearer token, loads the shipped alerting
rules, and holds the series they need."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from cluster_ops import services as shell_services
from scheduler.jobs import verbs
from scheduler.models import RoundStatus, SchedulerSettings, SchedulingRound

from .conftest import free_port, wait_until

RULES = Path(__file__).resolve().parents[2] / "monitoring" / "prometheus" / "cluster-ops-rules.yml"
TOKEN = "prometheus-scrape-token"

pytestmark = [pytest.mark.integration, pytest.mark.needs("alerting"), pytest.mark.django_db(transaction=True)]


@pytest.fixture
def prometheus(live_server, settings, tmp_path: Path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Prometheus scraping ``live_server`` every second with the token; its base URL."""
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = TOKEN, []
    target = urllib.parse.urlsplit(live_server.url).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "cluster-ops", "metrics_path": "/metrics",
                            "authorization": {"type": "Bearer", "credentials": TOKEN},
                            "static_configs": [{"targets": [target]}]}],
    }))
    port = free_port()
    server = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=20)


def api(base: str, path: str, **query: str) -> Any:
    try:
        with urllib.request.urlopen(f"{base}/api/v1/{path}?{urllib.parse.urlencode(query)}", timeout=5) as reply:
            return json.load(reply)["data"]
    except OSError:
        return None


def test_prometheus_scrapes_the_server_and_loads_the_rules(prometheus: str, tenant) -> None:  # type: ignore[no-untyped-def]
    now = timezone.now()
    SchedulerSettings.objects.update_or_create(pk=1, defaults={"round_seconds": 60})
    SchedulingRound.objects.create(policy="tiresias", started_at=now, finished_at=now, status=RoundStatus.OK)
    shell_services.record_heartbeat("celery@test", now)
    verbs.submit_job(tenant=tenant, name="queued", workload_profile="cifar10", total_work=1,
                        submitted_at=now - timedelta(minutes=3))

    def target_up() -> bool:
        targets = api(prometheus, "targets")
        return bool(targets and [t for t in targets["activeTargets"] if t["health"] == "up"])

    assert wait_until(target_up, 60), api(prometheus, "targets")

    def series_present() -> bool:
        names = ("cluster_ops_last_round_timestamp_seconds", "cluster_ops_worker_heartbeat_timestamp_seconds",
                 "cluster_ops_queue_oldest_wait_seconds", "cluster_ops_tenant_queued_jobs", "cluster_ops_gpus")
        return all((api(prometheus, "query", query=name) or {}).get("result") for name in names)

    assert wait_until(series_present, 30)
    queued = api(prometheus, "query", query='cluster_ops_tenant_queued_jobs{tenant="vision"}')["result"]
    assert float(queued[0]["value"][1]) == 1
    rules = [rule for group in api(prometheus, "rules")["groups"] for rule in group["rules"]]
    assert len(rules) == 7 and all(rule["health"] in ("ok", "unknown") for rule in rules)
    # Every rule evaluates without error against the live series (health "ok" once evaluated).
    assert wait_until(lambda: all(r["health"] == "ok" for g in api(prometheus, "rules")["groups"]
                                  for r in g["rules"]), 30)
