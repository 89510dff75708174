"""New workloads drawn from Philly's job list as the Pollux authors drew theirs (scheduler/sim/sampling.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from scheduler.sim.sampling import CONFIGURATIONS, SIA_APPLICATIONS, sample_jobs, sampled_workload
from scheduler.sim.traces import TraceJob, load_philly, load_pollux_workload

HOUR = 3600.0


def philly_job(n: int, at: str, seconds: float = 600.0, gpus: int = 1, gpu_time: float | None = None) -> TraceJob:
    moment = datetime.fromisoformat(at)
    return TraceJob(f"philly-{n}", 0.0, "", gpus, duration=seconds, gpu_time=gpu_time or seconds * gpus,
                    submitted_at=moment)


def day_of_jobs(count: int = 40) -> list[TraceJob]:
    """``count`` jobs a quarter-hour apart from 02:00 on two days (GPU-times across every bucket)."""
    jobs = []
    for n in range(count):
        day, slot = divmod(n, 20)
        minutes = 120 + 15 * slot
        gpu_time = (0.5, 5.0, 50.0, 500.0)[n % 4] * HOUR
        jobs.append(philly_job(n, f"2017-10-{9 + day:02d} {minutes // 60:02d}:{minutes % 60:02d}:00",
                               seconds=gpu_time, gpu_time=gpu_time))
    return jobs


def test_a_draw_keeps_the_time_of_day_from_the_start_hour_in_order_named_as_the_authors_files() -> None:
    drawn = sample_jobs(day_of_jobs(), 10, seed=3)
    assert len(drawn) == 10
    times = [job.submit_seconds for job in drawn]
    assert times == sorted(times) and all(0 <= t < 8 * HOUR for t in times)
    assert all(t % 900 == 0 for t in times)  # 02:00 + a quarter-hour multiple → seconds after 02:00
    assert [job.name for job in drawn] == [f"{job.application}-{n}" for n, job in enumerate(drawn)]
    for job in drawn:
        assert (job.num_gpus, job.batch_size) in CONFIGURATIONS[job.application]


def test_the_same_seed_draws_the_same_jobs_and_another_seed_others() -> None:
    jobs = day_of_jobs()
    assert sample_jobs(jobs, 10, seed=3) == sample_jobs(jobs, 10, seed=3)
    assert sample_jobs(jobs, 10, seed=3) != sample_jobs(jobs, 10, seed=4)


def test_short_huge_and_out_of_window_jobs_are_never_drawn() -> None:
    kept = philly_job(0, "2017-10-09 03:00:00", gpu_time=0.5 * HOUR)
    too_short = philly_job(1, "2017-10-09 03:00:00", seconds=59.0)
    too_big = philly_job(2, "2017-10-09 03:00:00", seconds=HOUR, gpus=1, gpu_time=1000 * HOUR)
    too_late = philly_job(3, "2017-10-09 10:00:00")  # 02:00 + 8 h: outside
    too_early = philly_job(4, "2017-10-09 01:59:59")
    (drawn,) = sample_jobs([kept, too_short, too_big, too_late, too_early], 1, seed=0)
    assert drawn.submit_seconds == HOUR
    with pytest.raises(ValueError, match="jobs: the window holds 1 eligible jobs, fewer than 2"):
        sample_jobs([kept, too_short, too_big, too_late, too_early], 2, seed=0)


def test_the_application_follows_the_gpu_time_bucket_and_sias_files_have_no_ncf() -> None:
    jobs = [philly_job(n, "2017-10-09 03:00:00", gpu_time=gpu_hours * HOUR)
            for n, gpu_hours in enumerate([0.5] * 30 + [500.0] * 2)]
    drawn = sample_jobs(jobs, 32, seed=1)
    assert {job.application for job in drawn if job.num_gpus in (24, 32, 48)} == {"imagenet"}
    assert sum(job.application == "imagenet" for job in drawn) == 2
    assert {job.application for job in drawn} - {"imagenet"} == {"cifar10", "ncf"}  # < 1 GPU-hour: either, evenly
    sia = sample_jobs(jobs, 32, seed=1, renamed=SIA_APPLICATIONS)
    assert {job.application for job in sia} == {"cifar10", "imagenet"}


@pytest.mark.parametrize("jobs, start_hour, hours", [(0, 2, 8), (10_001, 2, 8), (10, 24, 8), (10, 2, 0)])
def test_bounds_out_of_range_are_refused(jobs: int, start_hour: int, hours: int) -> None:
    with pytest.raises(ValueError, match="jobs must be"):
        sample_jobs(day_of_jobs(), jobs, seed=0, start_hour=start_hour, hours=hours)


def test_a_sampled_workload_is_written_whole_once_and_reads_as_the_authors_files(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    (traces / "philly").mkdir(parents=True)
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    rows += [f"2017-10-09 {2 + n // 6:02d}:{(n % 6) * 10:02d}:00,{600 + n},1,{600 + n},vc" for n in range(30)]
    (traces / "philly" / "philly_jobs_sia_pollux.csv").write_text("\n".join(rows) + "\n")
    cache = tmp_path / "cache"
    path = sampled_workload(traces, cache, 12, seed=7)
    jobs = load_pollux_workload(path)
    assert len(jobs) == 12 and {job.application for job in jobs} <= {"cifar10", "ncf"}
    assert [job.name for job in jobs] == [job.name for job in sample_jobs(load_philly(
        traces / "philly" / "philly_jobs_sia_pollux.csv"), 12, seed=7)]
    written = path.stat().st_mtime_ns
    assert sampled_workload(traces, cache, 12, seed=7) == path and path.stat().st_mtime_ns == written
    assert sampled_workload(traces, cache, 12, seed=8) != path
    assert not list(cache.glob("*.partial"))


def test_philly_rows_keep_their_clock_time(tmp_path: Path) -> None:
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus\n2017-10-09 07:01:55,66.0,1\n2017-10-09 06:13:03,2951.0,1\n")
    first, second = load_philly(trace)
    assert first.submitted_at == datetime(2017, 10, 9, 7, 1, 55) and first.submit_seconds == 2932.0
    assert second.submitted_at == datetime(2017, 10, 9, 6, 13, 3) and second.submit_seconds == 0.0


def test_another_job_list_is_another_draw(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    paths = []
    for name, shift in (("a", 0), ("b", 5)):
        traces = tmp_path / name
        (traces / "philly").mkdir(parents=True)
        rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
        rows += [f"2017-10-09 03:{n + shift:02d}:00,{600 + n},1,{600 + n},vc" for n in range(12)]
        (traces / "philly" / "philly_jobs_sia_pollux.csv").write_text("\n".join(rows) + "\n")
        paths.append(sampled_workload(traces, cache, 4, seed=1))
    first, second = (load_pollux_workload(path) for path in paths)
    assert paths[0] != paths[1] and [job.submit_seconds for job in first] != [job.submit_seconds for job in second]


def test_the_default_cache_is_this_users_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import tempfile

    from scheduler.sim.sampling import default_cache_dir

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    folder = default_cache_dir()
    assert folder.parent == tmp_path and folder.stat().st_mode & 0o077 == 0
    assert default_cache_dir() == folder
    folder.rmdir()
    (tmp_path / "elsewhere").mkdir()
    folder.symlink_to(tmp_path / "elsewhere")  # a folder planted under this user's name
    with pytest.raises(PermissionError, match="not a folder of this user.s own"):
        default_cache_dir()
    assert os.path.islink(folder)
