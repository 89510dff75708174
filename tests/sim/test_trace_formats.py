"""Every trace format loads, is recognised by its header, and a bad file is named precisely.

The fixtures under ``tests/fixtures/traces`` copy the real formats and folder layout;
the answers below are worked out by hand from them.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings

from scheduler.sim.records import WorkloadJob
from scheduler.sim.trace_formats import detect_format, load_native, load_trace, load_trace_jobs, write_native
from scheduler.sim.traces import TraceError, TraceJob, load_itp, load_philly, load_sia_workload

REAL = settings.TRACES_DIR
# elasticflow-itp/PROVENANCE.md: jobs per cluster, cluster01..10.
ITP_JOBS = (1_595, 5_778, 3_011, 15_802, 3_629, 2_396, 12_699, 13_047, 11_134, 260)


@pytest.fixture
def traces(fixtures_dir: Path) -> Path:
    return fixtures_dir / "traces"


def test_philly_times_are_seconds_from_the_earliest_submission(traces: Path) -> None:
    jobs = load_philly(traces / "philly" / "philly_jobs.csv")
    # Earliest is row 1 (06:01:55); row 0 is an hour later, row 2 a day later, row 4 at 08:00:00.
    assert [job.submit_seconds for job in jobs] == [3600.0, 0.0, 86400.0, 5.0, 7085.0]
    assert jobs[1] == TraceJob(name="philly-1", submit_seconds=0.0, application="", num_gpus=2,
                               duration=7200.0, tenant="6214e9", gpu_time=14400.0,
                               submitted_at=datetime(2017, 10, 9, 6, 1, 55))
    assert [job.tenant for job in jobs] == ["11cb48", "6214e9", "6214e9", None, "11cb48"]


def test_loads_itp_raw_and_both_elasticflow_variants(traces: Path) -> None:
    itp = traces / "elasticflow-itp"
    raw = load_itp(itp / "raw" / "cluster01.csv")
    assert raw[1] == TraceJob(name="b2", submit_seconds=50.0, application="", num_gpus=8, duration=3600.0)
    assert raw[1].gpu_seconds == 28800.0  # no gpu_time column: duration × GPUs
    elasticflow = load_itp(itp / "elasticflow" / "cluster01.csv")
    assert [(job.name, job.application, job.batch_size) for job in elasticflow] == [
        ("a1", "gpt2", 128), ("b2", "bert", 64)]
    assert [job.duration for job in elasticflow] == [job.duration for job in raw[:2]]
    testbed = load_itp(itp / "elasticVpollux_e.csv")  # submit_time rather than submission_time
    assert [(job.submit_seconds, job.num_gpus, job.duration) for job in testbed] == [(10.0, 1, 5644.0), (20.0, 8, 66.0)]


def test_loads_a_sia_workload(traces: Path) -> None:
    jobs = load_sia_workload(traces / "sia" / "workloads" / "saturn" / "workload-1.csv")
    assert jobs[0] == TraceJob(
        name="cifar10-0", submit_seconds=401.0, application="cifar10", num_gpus=12, batch_size=4096)
    assert jobs[0].gpu_seconds is None


def test_loads_the_native_format_with_its_defaults(traces: Path) -> None:
    assert load_native(traces / "native" / "workload.csv") == [
        WorkloadJob("rigid", 0.0, "vision", 4, 4, 3600.0),
        WorkloadJob("elastic", 30.0, "language", 1, 16, 14774.0, profile="bert", batch_size=12, gpu_type="a100"),
        WorkloadJob("plain", 60.0, "default", 2, 2, 120.5),
    ]


def test_native_files_round_trip(traces: Path, tmp_path: Path) -> None:
    jobs = load_trace(traces / "philly" / "philly_jobs.csv", elastic=True, seed=3)
    jobs += load_native(traces / "native" / "workload.csv")
    write_native(tmp_path / "out.csv", jobs)
    assert load_native(tmp_path / "out.csv") == jobs


@pytest.mark.parametrize(
    "relative, expected",
    [
        ("philly/philly_jobs.csv", "philly"),
        ("elasticflow-itp/raw/cluster01.csv", "itp"),
        ("elasticflow-itp/elasticflow/cluster01.csv", "itp"),
        ("elasticflow-itp/elasticVpollux_e.csv", "itp"),
        ("sia/workloads/saturn/workload-1.csv", "pollux"),
        ("native/workload.csv", "native"),
    ],
)
def test_detects_each_format_from_its_header(traces: Path, relative: str, expected: str) -> None:
    assert detect_format(traces / relative) == expected


def test_load_trace_turns_any_format_into_simulator_jobs(traces: Path, fixtures_dir: Path) -> None:
    assert load_trace(traces / "native" / "workload.csv") == load_native(traces / "native" / "workload.csv")
    philly = load_trace(traces / "philly" / "philly_jobs.csv")
    assert [job.id for job in philly] == ["philly-1", "philly-3", "philly-0", "philly-4", "philly-2"]  # by submission
    pollux = load_trace(fixtures_dir / "pollux" / "workloads-realistic" / "workload-1.csv", format="pollux")
    assert {job.profile for job in pollux} == {"cifar10", "ncf"}


def test_an_unknown_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "mystery.csv"
    path.write_text("when,gpus,what\n1,2,3\n")
    with pytest.raises(TraceError) as error:
        load_trace(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line 1") and "unknown trace format" in message
    assert "when" not in message  # the file's own header is not quoted back
    assert "philly: " in message and "native: " in message  # what it would have taken


@pytest.mark.parametrize(("content", "problem"), [
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not a UTF-8 text file"),
    (b"id,submit_time,min_gpus,total_work,profile\na,nan,1,10,ncf\n", "not infinite or NaN"),
    (b"id,submit_time,min_gpus,total_work,profile\na,0,1,1e308,ncf\n", "expected a value \u2264"),
    (b"id,submit_time,min_gpus,duration\na,1e300,1,10\n", "expected a value \u2264"),
])
def test_hostile_files_are_named_without_their_contents(tmp_path: Path, content: bytes, problem: str) -> None:
    """A binary file was a bare UnicodeDecodeError; NaN times and 1e308 work were accepted."""
    path = tmp_path / "hostile.csv"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=problem) as error:
        load_trace(path)
    assert "1e308" not in str(error.value) and "PNG" not in str(error.value)


def test_an_empty_file_and_unknown_format_names_are_refused(tmp_path: Path, traces: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(TraceError, match=r"unknown trace format"):
        detect_format(tmp_path / "empty.csv")
    with pytest.raises(ValueError, match="unknown trace format 'gavel'"):
        load_trace(traces / "philly" / "philly_jobs.csv", format="gavel")
    with pytest.raises(TraceError, match="read it with load_native"):
        load_trace_jobs(traces / "native" / "workload.csv")


PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66,1,66,vc\n"
ITP = "job_id,submission_time,duration,num_gpu\na,1,60,1\n"
NATIVE = "id,submit_time,min_gpus,max_gpus,profile,total_work,duration\n"


@pytest.mark.parametrize(
    "content, where",
    [
        (PHILLY + "yesterday,66,1,66,vc\n", "line 3, column 'timestamp': expected a local time YYYY-MM-DD HH:MM:SS"),
        (PHILLY + "2017-10-09 07:01:55+02:00,66,1,66,vc\n", "line 3, column 'timestamp': expected a local time"),
        (PHILLY + "2017-10-09 07:01:55,66,0,66,vc\n", "line 3, column 'num_gpus': expected a value ≥ 1"),
        (PHILLY + "2017-10-09 07:01:55,66,1,lots,vc\n", "line 3, column 'gpu_time': expected a number"),
        (ITP + "b,2,-5,1\n", "line 3, column 'duration': expected a value ≥ 0"),
        (ITP + "c,2,60,2.5\n", "line 3, column 'num_gpu': expected an integer"),
        (ITP + ",2,60,1\n", "line 3, column 'job_id': expected a non-empty value"),
        (NATIVE + "a,0,1,,bert,,3600\n", "line 2, column 'duration': must be empty for a job with profile 'bert'"),
        (NATIVE + "a,0,1,,,100,\n", "line 2, column 'total_work': must be empty for a job without a profile"),
        (NATIVE + "a,0,1,,,,\n", "line 2, column 'duration': expected a number"),
        (NATIVE + "a,0,4,2,,,60\n", "line 2, column 'max_gpus': expected a value ≥ 4"),
        (NATIVE + "a,0,1,,,,60\nb,0,1,,,,60\na,5,1,,,,60\n", "line 4, column 'id': duplicate id, first on line 2"),
        ("id,submit_time,min_gpus,duration\na,-1,1,60\n", "line 2, column 'submit_time': expected a value ≥ 0"),
    ],
)
def test_malformed_traces_name_file_line_and_column(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(content)
    with pytest.raises(TraceError) as error:
        load_trace(path)
    assert str(error.value).startswith(f"{path}, {where}")


def test_a_missing_column_is_named_when_the_format_is_given(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("timestamp,num_gpus,cluster\n2017-10-09 07:01:55,1,vc\n")
    with pytest.raises(TraceError) as error:
        load_trace(path, format="philly")
    assert str(error.value).startswith(f"{path}, line 1, column 'duration': missing column(s) ['duration']")


@pytest.mark.needs("traces")
def test_the_full_philly_list_loads_completely() -> None:
    # How fast it loads is a benchmark figure (docs/performance.md), not a pass/fail threshold.
    jobs = load_philly(REAL / "philly" / "philly_jobs_sia_pollux.csv")
    assert len(jobs) == 82_247
    assert len({job.tenant for job in jobs}) == 15  # PROVENANCE.md: 15 VCs
    assert min(job.submit_seconds for job in jobs) == 0.0
    assert max(job.submit_seconds for job in jobs) // 86_400 == 108  # 2017-09-04 .. 2017-12-22


@pytest.mark.needs("traces")
@pytest.mark.parametrize("variant", ["raw", "elasticflow"])
def test_itp_cluster_sizes_match_the_provenance_table(variant: str) -> None:
    files = [REAL / "elasticflow-itp" / variant / f"cluster{n:02d}.csv" for n in range(1, 11)]
    assert tuple(len(load_trace_jobs(path)) for path in files) == ITP_JOBS


@pytest.mark.needs("traces")
def test_every_sia_and_pollux_workload_loads_as_simulator_jobs() -> None:
    files = sorted((REAL / "sia" / "workloads").rglob("workload-*.csv"))
    files += sorted((REAL / "pollux").glob("workloads-*/workload-*.csv"))
    for path in files:
        jobs = load_trace(path)
        assert jobs and all(job.profile and job.min_gpus == job.max_gpus for job in jobs), path
