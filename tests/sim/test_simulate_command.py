"""`manage.py simulate` and `validate_pollux`: the interfaces an operator types."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from scheduler.sim.runner import Scenario, workload_for

REQUIRED_KEYS = {"policy", "jobs", "completed", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_queue_s",
                 "utilization", "jain", "ftf_p99", "rescales", "energy_kwh", "wall_s"}


def simulate(*args: str) -> str:
    out = StringIO()
    call_command("simulate", *args, stdout=out)
    return out.getvalue()


def test_json_output_has_the_documented_keys(fixtures_dir: Path) -> None:
    trace = fixtures_dir / "traces" / "native" / "workload.csv"
    result = json.loads(simulate("--trace", str(trace), "--policy", "fifo", "--nodes", "2", "--gpus-per-node", "8",
                                 "--gpu-type", "a100", "--json"))
    assert REQUIRED_KEYS <= set(result)
    assert (result["policy"], result["jobs"], result["completed"]) == ("fifo", 3, 3)


def test_readable_table(fixtures_dir: Path) -> None:
    trace = fixtures_dir / "pollux" / "workloads-realistic" / "workload-1.csv"
    table = simulate("--trace", str(trace), "--policy", "tiresias", "--nodes", "4")
    assert "average JCT" in table and "tiresias" in table


def test_a_power_cap_slows_the_run_and_is_reported(fixtures_dir: Path) -> None:
    trace = str(fixtures_dir / "traces" / "native" / "workload.csv")
    common = ["--trace", trace, "--policy", "fifo", "--nodes", "2", "--gpus-per-node", "8", "--gpu-type", "a100",
              "--json"]
    full, capped = json.loads(simulate(*common)), json.loads(simulate(*common, "--power-cap-fraction", "0.6"))
    assert capped["power_cap_fraction"] == 0.6 and capped["makespan_s"] > full["makespan_s"]
    # The same cap given to the cluster's one GPU type is the same run; a cap on another type changes nothing.
    by_type = json.loads(simulate(*common, "--power-cap", "a100=0.6"))
    other = json.loads(simulate(*common, "--power-cap", "v100=0.6"))
    assert by_type["power_caps_by_type"] == {"a100": 0.6}
    assert (by_type["makespan_s"], by_type["energy_kwh"]) == pytest.approx((capped["makespan_s"], capped["energy_kwh"]))
    assert (other["makespan_s"], other["energy_kwh"]) == pytest.approx((full["makespan_s"], full["energy_kwh"]))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--trace", "/nonexistent.csv"], "no such file"),
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--power-cap-fraction", "1.5"], "1.5"),
        (["--power-cap", "a100=0"], "cap of a100 must be.*got 0"),
        (["--power-cap", "a1000=0.7"], "Unknown GPU type 'a1000'"),
    ],
)
def test_bad_input_is_named(fixtures_dir: Path, args: list[str], message: str) -> None:
    base = ["--trace", str(fixtures_dir / "traces" / "native" / "workload.csv")]
    with pytest.raises(CommandError, match=message):
        simulate(*base, *args)


def test_a_malformed_trace_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,submit_time,min_gpus,duration\na,0,2,10\nb,soon,1,10\n")
    with pytest.raises(CommandError, match="line 3, column 'submit_time'"):
        simulate("--trace", str(bad))


def test_load_factor_compresses_arrivals(fixtures_dir: Path) -> None:
    trace = str(fixtures_dir / "traces" / "native" / "workload.csv")
    normal = workload_for(Scenario(trace=trace), elastic=False)
    doubled = workload_for(Scenario(trace=trace, load_factor=2.0), elastic=False)
    assert [j.submit_time / 2 for j in normal] == [j.submit_time for j in doubled]


def test_scenario_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="load_factor"):
        Scenario(trace="x", load_factor=0)


POLLUX = settings.TRACES_DIR / "pollux"


@pytest.mark.needs("traces")
def test_regression_against_the_pollux_authors_on_one_workload() -> None:
    """Workload 6 at 1.0× load: published avg JCT pollux 2,446 s, tiresias 3,470 s, optimus 5,302 s.

    All three stay within 10 % of the published figures (the issue asks 15 % of Tiresias and Optimus) and the
    published ordering holds. Speed is the benchmark's business (``validate_pollux`` prints each run's wall time),
    not a test's: a busy machine must not fail the suite.
    """
    from research.pollux import Case, run_case

    results = {p: run_case(Case(p, "1.0", 6), settings.TRACES_DIR) for p in ("pollux", "tiresias", "optimus")}
    for policy in ("tiresias", "optimus", "pollux"):
        assert results[policy].ours_avg_jct_s == pytest.approx(results[policy].theirs_avg_jct_s, rel=0.10), policy
    ours = [results[p].ours_avg_jct_s for p in ("pollux", "tiresias", "optimus")]
    assert ours == sorted(ours), "the published ordering pollux < tiresias < optimus"


SIA = settings.TRACES_DIR / "sia" / "workloads"


@pytest.mark.needs("traces")
def test_validate_sia_on_one_helios_workload() -> None:
    """Helios (saturn) workload 1 on Sia's 64-GPU heterogeneous cluster.

    The Sia authors' simulator gives sia 0.581 h average JCT on this one file (REFERENCE-SETUP.md §6, measured
    there with their flags); ours stays within 10 %, and our sia-profiled beats it.
    """
    out = StringIO()
    call_command("validate_sia", "--sets", "helios", "--workloads", "1", "--policy", "sia", "--policy",
                 "sia-profiled", "--json", stdout=out)
    result = json.loads(out.getvalue())
    rows = {row["policy"]: row for row in result["rows"]}
    assert rows["sia"]["set"] == "helios" and rows["sia"]["jobs"] == 160 and rows["sia"]["unfinished"] == 0
    assert rows["sia"]["ours_avg_jct_h"] == pytest.approx(0.581, rel=0.10)
    assert rows["sia"]["published_avg_jct_h"] == 0.7 and rows["sia-profiled"]["published_sia_avg_jct_h"] == 0.7
    assert rows["sia-profiled"]["ours_avg_jct_h"] < rows["sia"]["ours_avg_jct_h"]


def test_validate_sia_refuses_a_bad_count() -> None:
    with pytest.raises(CommandError, match="--workloads"):
        call_command("validate_sia", "--workloads", "0")


@pytest.mark.needs("traces")
def test_validate_sia_prints_every_policy_of_sias_table_with_restarts() -> None:
    """Sia's Table 3 compares against Pollux blind to types and Gavel; both are policies here, with Sia's
    ordering on one Helios file (sia < pollux < gavel) and every column, restarts per job included."""
    out = StringIO()
    call_command("validate_sia", "--sets", "helios", "--workloads", "1", "--policy", "sia", "--policy",
                 "pollux-unaware", "--policy", "gavel", "--json", stdout=out)
    rows = {row["policy"]: row for row in json.loads(out.getvalue())["rows"]}
    assert rows["gavel"]["published_avg_jct_h"] == 2.5 and rows["pollux-unaware"]["published_avg_jct_h"] == 1.0
    jct = {policy: rows[policy]["ours_avg_jct_h"] for policy in rows}
    assert jct["sia"] < jct["pollux-unaware"] < jct["gavel"], jct
    for row in rows.values():
        assert row["unfinished"] == 0 and row["ours_restarts_per_job"] >= 0 and row["ours_worst_ftf"] >= 1


def test_validate_sias_table_has_a_restarts_column() -> None:
    from research.management.commands.validate_sia import Command

    row = {"policy": "pollux-unaware", "set": "helios", "avg_jct_difference": -0.2, "published_avg_jct_h": 1.0,
           "published_sia_avg_jct_h": 0.7, "ours_restarts_per_job": 3.35, "vs_our_sia": 0.143}
    for metric, ours, published in [("avg_jct_h", 0.8, 1.0), ("p99_jct_h", 10.5, 15.0), ("makespan_h", 15.3, 25.5),
                                    ("gpu_h_per_job", 5.04, 5.9), ("worst_ftf", 8.73, 4.6)]:
        row |= {f"ours_{metric}": ours, f"published_{metric}": published}
    lines = Command()._table([row], 1, 60.0).splitlines()
    assert lines[1].split()[-6:] == ["restarts/job", "worst", "FTF", "vs", "our", "sia"]
    assert lines[2].split() == ["pollux-unaware", "helios", "0.80/1.00", "(-20%)", "10.50/15.00", "15.30/25.50",
                                "5.04/5.90", "3.35", "8.73/4.60", "+14.3%"]


def test_validate_sia_compares_each_policy_with_our_sia_on_the_same_files() -> None:
    """The held-out sets have no published figure: each row's yardstick is our sia on the same files."""
    from research.sia import Case, CaseResult, table

    def result(policy: str, workload: int, jct_h: float) -> CaseResult:
        return CaseResult(Case(policy, "helios-rate-40", workload), (jct_h * 3600,), 0, 3600.0, 3600.0, 1, (1.0,), 1.0)

    rows = {row["policy"]: row for row in table([result("sia", 1, 1.0), result("sia", 2, 3.0),
                                                 result("sia-hesrpt", 1, 0.8), result("sia-hesrpt", 2, 2.6)])}
    assert rows["sia-hesrpt"]["vs_our_sia"] == pytest.approx(-0.15) and rows["sia"]["vs_our_sia"] == 0.0
    assert rows["sia-hesrpt"]["published_avg_jct_h"] is None and rows["sia-hesrpt"]["published_sia_avg_jct_h"] is None
    (alone,) = table([result("sia-hesrpt", 1, 0.8)])
    assert alone["vs_our_sia"] is None


@pytest.mark.needs("traces")
def test_the_held_out_sets_are_other_draws_of_sias_generator() -> None:
    """Fig. 7's files (Helios-sampled at 10, 30, 40 and 50 jobs an hour) exist, ten a rate, none is a file of the
    sets the policies were built on, and from 30 jobs an hour on, at least 30 % of each file's jobs are new."""
    import csv

    from research.sia import DEFAULT_SETS, SETS, cases

    def jobs(path: Path) -> set[tuple[str, str]]:
        with path.open(newline="") as handle:
            return {(row["time"], row["application"]) for row in csv.DictReader(handle)}

    held_out = tuple(name for name in SETS if name.startswith("helios-rate-"))
    assert held_out == ("helios-rate-10", "helios-rate-30", "helios-rate-40", "helios-rate-50")
    traces = settings.TRACES_DIR
    built_on = [jobs(Path(case.scenario(traces).trace)) for case in cases(("sia",), DEFAULT_SETS + ("newtrace",))]
    held_out_cases = cases(("sia",), held_out)
    assert len(held_out_cases) == 40
    for case in held_out_cases:
        mine = jobs(Path(case.scenario(traces).trace))
        assert mine not in built_on
        if case.set != "helios-rate-10":
            assert max(len(mine & theirs) for theirs in built_on) <= 0.7 * len(mine), case


def test_validate_pollux_compares_a_policy_of_ours_with_pollux() -> None:
    from research.pollux import Case, CaseResult, grid_table

    results = [CaseResult(Case("sia-profiled", "1.0", w), 2000.0 + w, None, 2500.0, 1.0) for w in (1, 2)]
    (row,) = grid_table(results)
    assert row["published_avg_jct_s"] is None and row["difference"] is None
    assert row["ours_avg_jct_s"] == 2001.5 and row["published_pollux_avg_jct_s"] == 2500.0


def test_a_reproduced_policy_runs_without_the_calm_guards_and_ours_with_them() -> None:
    from scheduler.sim.runner import scheduling_config
    from scheduler.sim.scenario import Scenario

    def cycle(policy: str, artifact: str):  # type: ignore[no-untyped-def]
        return scheduling_config(Scenario(trace="x.csv", policy=policy, measured_profiles=True,
                                          artifact=artifact)).cycle

    assert (cycle("sia", "sia").payback_seconds, cycle("sia", "sia").settle_seconds) == (0.0, 0.0)
    assert cycle("tiresias", "pollux").payback_seconds == 0.0 and cycle("gavel", "sia").settle_seconds == 0.0
    ours = cycle("sia-profiled", "sia")
    assert ours.payback_seconds > 0 and ours.settle_seconds > 0


def test_sias_policy_table_of_restart_delays_is_priced_by_reproduced_sia_only() -> None:
    """Sia's simulator charges one table of restart delays and its policy prices another (cifar10 50 s charged, 30 s
    priced; yolov3 80 s and 45 s). That is Sia's quirk: the reproduced `sia` keeps it; ours price what is charged, as
    they do on a live cluster."""
    from scheduler.core.config import build_policy
    from scheduler.core.policies.sia import SiaPolicy
    from scheduler.core.types import JobInfo
    from scheduler.sim.runner import scheduling_config
    from scheduler.sim.scenario import Scenario

    def charged_and_priced(policy: str, profile: str) -> tuple[float, float]:
        config = scheduling_config(Scenario(trace="x.csv", policy=policy, measured_profiles=True, artifact="sia"))
        built = build_policy(config)
        assert isinstance(built, SiaPolicy)
        job = JobInfo(id="j", tenant="t", submit_time=0.0, min_gpus=1, max_gpus=8, total_work=1.0, profile=profile)
        return config.restart_delay(profile), built.restart_delay(job)

    assert charged_and_priced("sia", "cifar10") == (50.0, 30.0)
    assert charged_and_priced("sia", "yolov3") == (80.0, 45.0)
    for ours in ("sia-profiled", "sia-hesrpt"):
        assert charged_and_priced(ours, "cifar10") == (50.0, 50.0)
        assert charged_and_priced(ours, "yolov3") == (80.0, 80.0)


PHILLY_JOBS = settings.TRACES_DIR / "philly" / "philly_jobs_sia_pollux.csv"


@pytest.mark.needs("traces")
def test_the_sampled_sets_are_new_draws_of_the_generator_behind_sias_philly_files() -> None:
    """Held out: `philly-sampled` draws 160 jobs a seed from Philly's job list as Sia's Philly files were drawn, none
    of them one of those files, with their applications and no ncf job; the homogeneous variant the same draws."""
    import csv

    from research.sia import SETS, cases

    def jobs(path: Path) -> list[tuple[str, str]]:
        with path.open(newline="") as handle:
            return [(row["time"], row["application"]) for row in csv.DictReader(handle)]

    traces = settings.TRACES_DIR
    theirs = [jobs(Path(case.scenario(traces).trace)) for case in cases(("sia",), ("philly",))]
    sampled = cases(("sia",), ("philly-sampled",))
    homogeneous = cases(("sia",), ("philly-homogeneous-sampled",))
    assert len(sampled) == len(homogeneous) == 8 and SETS["philly-sampled"].preset == "sia-hetero"
    for case, twin in zip(sampled, homogeneous, strict=True):
        mine = jobs(Path(case.scenario(traces).trace))
        assert len(mine) == 160 and mine not in theirs
        assert {application for _, application in mine} <= {"bert", "cifar10", "deepspeech2", "imagenet", "yolov3"}
        assert max(float(time) for time, _ in mine) < 8 * 3600
        assert jobs(Path(twin.scenario(traces).trace)) == mine
    assert len({tuple(jobs(Path(case.scenario(traces).trace))) for case in sampled}) == 8


@pytest.mark.needs("traces")
def test_validate_pollux_runs_sampled_workloads_against_our_pollux() -> None:
    """`--seed`: a workload drawn at that seed, 160 × load jobs, with no published figure; each policy beside our
    pollux on the same draws."""
    from research.pollux import Case
    from scheduler.sim.traces import load_pollux_workload

    out = StringIO()
    call_command("validate_pollux", "--seed", "11", "--load", "0.5", "--policy", "pollux", "--policy", "sia-hesrpt",
                 "--json", stdout=out)
    rows = {row["policy"]: row for row in json.loads(out.getvalue())["rows"]}
    pollux, ours = rows["pollux"], rows["sia-hesrpt"]
    assert pollux["workloads"] == 1 and pollux["vs_our_pollux"] == 0.0
    assert ours["published_avg_jct_s"] is None and ours["published_pollux_avg_jct_s"] is None
    assert ours["vs_our_pollux"] == pytest.approx(ours["ours_avg_jct_s"] / pollux["ours_avg_jct_s"] - 1, abs=0.001)
    for load, jobs in (("0.5", 80), ("1.5", 240)):
        trace = Path(Case("pollux", load, 11, sampled=True).scenario(settings.TRACES_DIR).trace)
        assert len(load_pollux_workload(trace)) == jobs


@pytest.mark.parametrize("args, message", [(["--seed", "-1"], "--seed must be"),
                                           (["--seed", "1", "--workload", "1"], "--seed and --workload")])
@pytest.mark.parametrize("traces", ["present", "absent"])  # a machine without traces names the bad argument too
def test_validate_pollux_refuses_a_bad_seed(args: list[str], message: str, traces: str, settings: Any,
                                            tmp_path: Path) -> None:
    if traces == "absent":
        settings.TRACES_DIR = tmp_path / "no-traces"
    with pytest.raises(CommandError, match=message):
        call_command("validate_pollux", *args)


def test_validate_polluxs_table_shows_each_policy_beside_our_pollux() -> None:
    from research.management.commands.validate_pollux import Command

    rows = [{"policy": "sia-hesrpt", "load": "0.5", "ours_avg_jct_s": 1361.0, "published_avg_jct_s": None,
             "difference": None, "published_pollux_avg_jct_s": 1534.0, "wall_s": 31.9, "vs_our_pollux": -0.051},
            {"policy": "tiresias", "load": "0.5", "ours_avg_jct_s": 1700.0, "published_avg_jct_s": None,
             "difference": None, "published_pollux_avg_jct_s": None, "wall_s": 20.0, "vs_our_pollux": None}]
    lines = Command()._table(rows, 2, 50.0).splitlines()
    assert lines[1].split()[-6:] == ["diff", "vs", "our", "pollux", "sim", "s"]
    assert lines[2].split() == ["sia-hesrpt", "0.5", "1361", "1534", "-11.3%", "-5.1%", "31.9", "(Pollux's)"]
    assert lines[3].split() == ["tiresias", "0.5", "1700", "–", "–", "20.0"]
