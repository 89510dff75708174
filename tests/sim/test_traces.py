"""Trace loaders read the real formats and name what is wrong in a bad file."""

from pathlib import Path

import pytest

from scheduler.sim.traces import TraceError, TraceJob, load_pollux_workload, pollux_total_progress


def test_loads_a_pollux_workload(fixtures_dir: Path) -> None:
    jobs = load_pollux_workload(fixtures_dir / "pollux" / "workloads-realistic" / "workload-1.csv")
    assert jobs[1] == TraceJob(name="ncf-1", submit_seconds=600.0, application="ncf", num_gpus=4, batch_size=1024)
    assert [job.application for job in jobs] == ["cifar10", "ncf", "cifar10", "ncf"]


def test_total_progress_is_the_end_of_the_initial_batch_curve(fixtures_dir: Path) -> None:
    # validation-128 (the initial batch size) ends at 780, not validation-1024's 999999.
    assert pollux_total_progress(fixtures_dir / "pollux" / "traces" / "cifar10") == 780.0


@pytest.mark.parametrize(
    "content, where",
    [
        ("name,time,application,num_replicas\nx,1,ncf,1\n", "line 1, column 'batch_size': missing column"),
        ("name,time,application,num_replicas,batch_size\nx,1,ncf,1,256\ny,soon,ncf,1,256\n",
         "line 3, column 'time': expected a number"),
        ("name,time,application,num_replicas,batch_size\nx,1,ncf,0,256\n",
         "line 2, column 'num_replicas': expected a value ≥ 1"),
        ("name,time,application,num_replicas,batch_size\nx,1,,1,256\n",
         "line 2, column 'application': expected a non-empty value"),
    ],
)
def test_malformed_workloads_name_file_line_and_column(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "workload.csv"
    path.write_text(content)
    with pytest.raises(TraceError) as error:
        load_pollux_workload(path)
    assert str(error.value).startswith(f"{path}, {where}")


def test_an_application_without_curves_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no validation curve"):
        pollux_total_progress(tmp_path)
