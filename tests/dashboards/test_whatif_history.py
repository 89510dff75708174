"""The what-if domain on this cluster's data: recent history as a trace, the live cluster as node groups,
launching and reading sweeps."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from scheduler import whatif
from scheduler.core.config import policy_summary
from scheduler.live.config import scheduler_settings
from scheduler.models import Job, JobState, WhatIfStatus
from scheduler.sim.trace_formats import load_native
from scheduler.whatif import history as whatif_history
from scheduler.whatif import traces, views
from scheduler.whatif.history import Choices

from .history import History

pytestmark = pytest.mark.django_db


def test_history_becomes_simulator_jobs(history: History) -> None:
    cancelled = history.finished[0]
    Job.objects.filter(pk=cancelled.pk).update(state=JobState.CANCELLED, progress=100.0)
    jobs = whatif_history.history_workload(history.now - timedelta(days=1), history.now)
    assert len(jobs) == len(history.finished) + len(history.running)  # the pending job never started
    assert jobs[0].submit_time == 0 and [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
    by_id = {j.id: j for j in jobs}
    assert by_id[str(cancelled.pk)].total_work == 100.0  # only the work it did
    big = by_id[str(history.running[0].pk)]
    assert (big.tenant, big.profile, big.min_gpus, big.max_gpus, big.total_work) == ("vision", "cifar10", 2, 6, 50_000)


def test_the_history_trace_is_named_by_its_contents_and_reads_back(history: History, tmp_path: Path) -> None:
    jobs = whatif_history.history_workload(history.now - timedelta(days=1), history.now)
    path = whatif_history.write_history_trace(jobs, tmp_path)
    assert whatif_history.write_history_trace(jobs, tmp_path) == path
    assert load_native(path) == jobs
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_live_cluster_as_node_groups(history: History) -> None:
    assert whatif_history.live_node_groups(history.now) == [["a100", 8, 1], ["v100", 8, 1]]


def test_baseline_is_the_live_policy_and_the_what_if_the_choices(history: History, settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    # The same cap on both of the cluster's types is one all-types cap; the T4 is not in this cluster.
    caps = {"a100": 0.7, "v100": 0.7, "t4": 0.5}
    choices = Choices(policy="pollux", power_caps=caps, power_down_spares=1, pue=1.2, load_factor=1.5)
    baseline, scenario = whatif_history.scenarios_for(choices, history.now)
    assert baseline.policy == scheduler_settings().policy
    assert (baseline.power_cap_fraction, baseline.power_down_spares, baseline.load_factor) == (1.0, None, 1.0)
    assert (scenario.policy, scenario.power_cap_fraction, scenario.power_down_spares) == ("pollux", 0.7, 1)
    assert scenario.power_caps_by_type == baseline.power_caps_by_type == {}
    assert baseline.pue == scenario.pue == 1.2
    assert baseline.node_groups == [["a100", 8, 1], ["v100", 8, 1]]
    assert baseline.tenant_quotas == {"language": 8, "vision": 8}
    assert baseline.trace.startswith("history:") and traces.resolve(baseline.trace).parent == tmp_path / "whatif"


def test_different_caps_per_gpu_type_stay_per_type(history: History, settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    _, scenario = whatif_history.scenarios_for(Choices(power_caps={"a100": 0.6}), history.now)
    # the V100s were not given a cap: uncapped, 1.0
    assert (scenario.power_cap_fraction, scenario.power_caps_by_type) == (1.0, {"a100": 0.6, "v100": 1.0})
    assert whatif.caps_label(scenario.as_dict()) == "caps a100 0.6, v100 1"
    assert whatif_history.cluster_gpu_types(whatif_history.LIVE_CLUSTER, history.now) == ["a100", "v100"]


def test_no_history_is_refused_with_a_reason(db: None, tmp_path: Path, settings) -> None:
    from django.utils import timezone

    settings.VAR_DIR = tmp_path
    with pytest.raises(ValueError, match="nothing to replay"):
        whatif_history.scenarios_for(Choices(), timezone.now())


def test_a_what_if_runs_and_compares_against_its_baseline(
    history: History, staff: User, settings, tmp_path: Path, eager_celery: None, django_capture_on_commit_callbacks
) -> None:
    settings.VAR_DIR = tmp_path
    choices = Choices(policy="fifo", power_caps={"a100": 0.7, "v100": 0.7}, power_down_spares=0,
                      grid_g_co2_per_kwh=100.0)
    with django_capture_on_commit_callbacks(execute=True):  # the sweep is launched after commit
        sweep = whatif_history.start_whatif(staff, choices, history.now)
    view = views.sweep_view(sweep.pk, staff)
    assert view is not None and view.finished and view.progress == 1.0
    assert [run.status for run in view.runs] == [WhatIfStatus.SUCCEEDED] * 2
    assert view.runs[0].label.startswith("baseline") and "cap 0.7" in view.runs[1].label
    assert "#" not in view.runs[1].label  # a run is named by what it is, not by a row id beside sweep numbers
    assert sweep.name.startswith("all ") and "of history" in sweep.name  # 20 hours of history, not "last 7 d"
    baseline, what_if = (run.summary for run in view.runs)
    assert baseline is not None and what_if is not None
    rows = {row.metric: row for row in views.trade_off(baseline, what_if)}
    assert rows["facility energy"].change is not None and rows["facility energy"].change < 0  # capped and off
    assert rows["CO₂"].value == pytest.approx(what_if.facility_kwh * 0.1)
    times = views.tenant_times(view, None)
    assert [t.tenant for t in times] == ["language", "vision"] and all(v is not None for v in times[0].avg_jct_h)
    assert [t.tenant for t in views.tenant_times(view, {"vision"})] == ["vision"]
    # Each tenant's energy plus the idle GPUs' is the run's, in every run; tenants don't see the idle share.
    energy = views.tenant_energy(view, None)
    assert [row.tenant for row in energy] == ["language", "vision", views.UNALLOCATED]
    for i, summary in enumerate((baseline, what_if)):
        assert sum(row.facility_kwh[i] for row in energy) == pytest.approx(summary.facility_kwh)
        assert sum(row.co2_kg[i] for row in energy) == pytest.approx(summary.co2_kg)
        assert all(row.facility_kwh[i] > 0 for row in energy[:2])
    assert [row.tenant for row in views.tenant_energy(view, {"vision"})] == ["vision"]
    past = views.past_sweeps()
    assert [(p.sweep_id, p.runs, p.state) for p in past] == [(sweep.pk, 2, "done")]


def test_a_bad_choice_is_refused_naming_the_field(history: History, staff: User, settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    with pytest.raises(ValidationError) as refused:
        whatif_history.start_whatif(staff, Choices(pue=0.5), history.now)
    assert "pue" in refused.value.message_dict


def test_trace_files_lists_job_traces_only(fixtures_dir: Path) -> None:
    found = dict(traces.trace_files(str(fixtures_dir)))
    assert found["pollux/workloads-realistic/workload-1.csv"] == "pollux"
    assert not any(name.startswith("pollux/traces/") for name in found)  # validation curves are not traces


# --- defaults that compare like with like -------------------------------------


def test_the_history_offered_is_what_exists(history: History) -> None:
    span = whatif_history.history_span(history.now)
    assert span is not None and timedelta(hours=20) < span < timedelta(hours=21)
    assert whatif_history.history_label(7, span) == f"all {span / timedelta(hours=1):.1f} h of history"
    assert whatif_history.history_label(7, timedelta(minutes=20)) == "all 20 min of history"
    assert whatif_history.history_label(7, timedelta(days=9)) == "last 7 d"


def test_the_energy_page_starts_from_the_live_settings(history: History, staff: User, settings) -> None:
    from cluster_ops.dashboards import energy
    live = scheduler_settings()
    live.policy = "pollux"
    live.save()
    sources, policies, policy, disabled, days_max, days, said = energy.init(0, user=staff)
    live_option = {"label": "pollux (live)", "value": "pollux", "title": policy_summary("pollux")}
    assert policy == "pollux" and live_option in policies
    assert (days_max, days) == (1, 1) and said.startswith("history recorded: 20.") and said.endswith(" h")
    assert not disabled
    assert f"Price ({settings.CURRENCY} per kWh)" in str(energy.app.layout)  # a price says its currency
    assert energy.COST_LABEL == "energy cost"  # the trade-off row whose figures are shown in CURRENCY
