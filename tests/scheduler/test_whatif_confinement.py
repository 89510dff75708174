"""A what-if must not read any file outside its traces, nor show a file's contents.

Before: ``trace_path()`` took absolute paths and ``../``; a what-if on ``var/secret_key`` failed with a
``TraceError`` quoting the key, and the Energy page showed that error to tenant users.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from scheduler import whatif
from scheduler.models import WhatIfRun, WhatIfStatus, WhatIfSweep
from scheduler.sim.runner import Scenario
from scheduler.whatif import traces, views

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-KEY-never-shown-0123456789abcdef"


@pytest.fixture
def roots(settings, tmp_path: Path, fixtures_dir: Path) -> Path:  # type: ignore[no-untyped-def]
    """TRACES_DIR with one real trace and a symlink pointing out of it; a secret beside it, as var/secret_key."""
    traces_dir, var_dir = tmp_path / "traces", tmp_path / "var"
    traces_dir.mkdir()
    var_dir.mkdir()
    (traces_dir / "ok.csv").write_bytes((fixtures_dir / "traces" / "native" / "workload.csv").read_bytes())
    (var_dir / "secret_key").write_text(SECRET + "\n")
    (traces_dir / "escape.csv").symlink_to(var_dir / "secret_key")
    (traces_dir / "bad.csv").write_text(SECRET + ",x\n1,2\n")  # inside, but not a trace: its error names no content
    settings.TRACES_DIR, settings.VAR_DIR = traces_dir, var_dir
    return var_dir


def scenario(trace: str) -> Scenario:
    return Scenario(trace=trace, policy="fifo", nodes=2, gpus_per_node=8, gpu_type="a100")


@pytest.mark.parametrize("name", [
    "/etc/shadow", "/etc/passwd", "../var/secret_key", "ok.csv/../../var/secret_key", "escape.csv",
    "history:../secret_key", "history:/etc/passwd", "history:sub/dir.csv", "..\\var\\secret_key",
])
def test_a_trace_outside_its_folder_is_refused_before_a_run_exists(roots: Path, name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        whatif.create_run(scenario(name))
    assert list(refused.value.message_dict) == ["trace"]
    assert SECRET not in str(refused.value)
    assert not WhatIfRun.objects.exists()


def test_a_trace_name_with_a_nul_byte_is_not_a_scenario(roots: Path) -> None:
    with pytest.raises(ValueError, match="trace"):
        scenario("ok.csv\x00/../../var/secret_key")


def test_the_absolute_path_of_a_real_trace_is_refused_too(roots: Path, settings) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError):
        whatif.create_run(scenario(str(Path(settings.TRACES_DIR) / "ok.csv")))
    assert whatif.create_run(scenario("ok.csv")).status == WhatIfStatus.QUEUED


def test_a_stored_run_pointing_outside_fails_without_reading_the_file(roots: Path) -> None:
    """A row written before this rule (or by hand) is still confined when it runs."""
    run = whatif.create_run(scenario("ok.csv"))
    WhatIfRun.objects.filter(pk=run.pk).update(scenario={**run.scenario, "trace": str(roots / "secret_key")})
    assert whatif.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == WhatIfStatus.FAILED and run.error.startswith("trace:") and SECRET not in run.error


def test_a_malformed_trace_inside_fails_without_quoting_its_contents(roots: Path) -> None:
    run = whatif.create_run(scenario("bad.csv"))
    assert whatif.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == WhatIfStatus.FAILED and "bad.csv" in run.error and SECRET not in run.error


def test_history_traces_resolve_inside_the_history_folder(roots: Path) -> None:
    (roots / "whatif").mkdir()
    (roots / "whatif" / "history-1.csv").write_bytes((Path(traces.resolve("ok.csv"))).read_bytes())
    assert traces.resolve("history:history-1.csv") == roots / "whatif" / "history-1.csv"


def test_tenant_users_never_see_a_runs_error_text(roots: Path, operator: User) -> None:
    tenant_user = User.objects.create_user("tina", password="pw-tina-12345")
    sweep = whatif.create_sweep_of([scenario("bad.csv")], operator)
    [run] = sweep.runs.all()
    whatif.execute_run(run.pk)
    staff_view, tenant_view = views.sweep_view(sweep.pk, operator), views.sweep_view(sweep.pk, tenant_user)
    assert staff_view is not None and tenant_view is not None
    assert "bad.csv" in staff_view.runs[0].error
    assert tenant_view.runs[0].error == views.HIDDEN_ERROR


def test_a_sweep_view_shows_tenants_only_their_tenants_figures(db: None) -> None:
    summary = {"avg_jct_s": 10.0, "unallocated_energy_kwh": 3.0, "tenants": {"vision": {"jobs": 1},
                                                                            "language": {"jobs": 2}}}
    shown = views.shown_summary(summary, {"vision"})
    assert shown is not None and shown.avg_jct_s == 10.0 and shown.tenants == {"vision": {"jobs": 1}}
    assert shown.unallocated_energy_kwh is None  # the idle GPUs' energy is no tenant's
    full = views.shown_summary(summary, None)
    assert full is not None and full.unallocated_energy_kwh == 3.0 and set(full.tenants) == {"vision", "language"}
    assert WhatIfSweep.objects.count() == 0
    assert dataclasses.is_dataclass(views.RunView)
