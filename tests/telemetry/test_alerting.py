"""Alerting and Grafana: the series the rules need on /metrics, the rules under `promtool test rules`, and every
series the rules and the Grafana board name exported by /metrics."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.test import Client

from cluster_ops import services as shell_services
from scheduler.models import Gpu, GpuHealth, Node, RoundStatus, SchedulerSettings, SchedulingRound

from .test_metrics import scrape, telemetry  # noqa: F401 (a fixture)

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = MONITORING / "prometheus" / "cluster-ops-rules.yml"
RULE_TESTS = MONITORING / "prometheus" / "cluster-ops-rules.test.yml"
BOARD = MONITORING / "grafana" / "cluster-ops.json"
SERIES = re.compile(r"\b(?:DCGM_FI_\w+|cluster_ops_\w+)\b")

pytestmark = pytest.mark.django_db


@pytest.fixture
def operating(telemetry: None, node: Node, now: datetime) -> None:  # noqa: F811
    """The telemetry fixture, plus a lost GPU, two rounds (the later one failed), a start between rounds after them,
    settings and a heartbeat."""
    Gpu.objects.filter(pk=node.gpus.get(index=3).pk).update(health=GpuHealth.LOST)
    SchedulerSettings.objects.update_or_create(pk=1, defaults={"round_seconds": 45, "paused": False})
    SchedulingRound.objects.create(policy="tiresias", started_at=now - timedelta(seconds=95),
                                   finished_at=now - timedelta(seconds=90), status=RoundStatus.OK)
    SchedulingRound.objects.create(policy="tiresias", started_at=now - timedelta(seconds=50),
                                   finished_at=now - timedelta(seconds=45), status=RoundStatus.FAILED)
    SchedulingRound.objects.create(policy="tiresias", started_at=now - timedelta(seconds=21), between_rounds=True,
                                   finished_at=now - timedelta(seconds=20), status=RoundStatus.OK, starts=1)
    shell_services.record_heartbeat("celery@rounds", now - timedelta(seconds=12))


def values(families: dict[str, list]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for samples in families.values() for s in samples}


def test_the_series_the_alerts_need(operating: None, operator_client: Client, now: datetime, settings) -> None:
    value = values(scrape(operator_client))
    assert value[("cluster_ops_gpus", (("health", "lost"),))] == 1
    assert value[("cluster_ops_gpus", (("health", "ok"),))] == 3
    assert value[("cluster_ops_gpus", (("health", "degraded"),))] == 0
    assert value[("cluster_ops_queue_oldest_wait_seconds", ())] == pytest.approx(300, abs=5)
    assert value[("cluster_ops_tenant_quota_gpus", (("tenant", "vision"),))] == 8
    assert value[("cluster_ops_tenant_queued_jobs", (("tenant", "language"),))] == 1
    # The last *successful* round: the failed one after it does not count, nor do starts between rounds (a stream of
    # submissions must not hide rounds that stopped).
    assert value[("cluster_ops_last_round_timestamp_seconds", ())] == pytest.approx(
        (now - timedelta(seconds=90)).timestamp())
    assert value[("cluster_ops_round_interval_seconds", ())] == 45
    assert value[("cluster_ops_scheduler_paused", ())] == 0
    assert value[("cluster_ops_worker_heartbeat_timestamp_seconds", (("worker", "celery@rounds"),))] == \
        pytest.approx((now - timedelta(seconds=12)).timestamp())
    assert value[("cluster_ops_heartbeat_interval_seconds", ())] == settings.HEARTBEAT_SECONDS


def test_a_cluster_that_never_ran_a_round_exports_no_timestamp(operator_client: Client) -> None:
    families = scrape(operator_client)
    assert families["cluster_ops_last_round_timestamp_seconds"] == []
    assert families["cluster_ops_worker_heartbeat_timestamp_seconds"] == []
    assert families["cluster_ops_queue_oldest_wait_seconds"][0].value == 0


@pytest.mark.needs("alerting")
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    checked = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0 and "SUCCESS: 7 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = subprocess.run(["promtool", "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_has_a_promtool_test() -> None:
    alerts = set(re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), re.M))
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert len(alerts) == 7 and alerts == tested


def board_queries() -> list[str]:
    board = json.loads(BOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_the_rules_and_the_board_name_only_exported_series(operating: None, operator_client: Client) -> None:
    exported = set(scrape(operator_client))
    board = board_queries()
    panels = {panel["title"] for panel in json.loads(BOARD.read_text())["panels"]}
    assert {"Allocated but idle GPUs", "Queue", "Energy per hour (kWh)", "GPUs held per tenant"} <= panels
    for query in [*board, *re.findall(r"expr: \|?\s*(.+?)\n\s+for:", RULES.read_text(), re.S)]:
        named = set(SERIES.findall(query))
        assert named, f"{query!r} names no Cluster Ops or DCGM series"
        assert named <= exported, f"{query!r} names {sorted(named - exported)}, which /metrics does not export"
