"""The Slurm back-end's pure parts, without a lab: Slurm's notations and the measured restart delay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.backends import measure_restart
from scheduler.backends.slurm.client import expand_hostlist, parse_gres
from scheduler.live import restarts
from scheduler.live.config import scheduler_settings
from scheduler.models import Job, JobState, RescaleEvent, RescaleKind, RoundMemory, SettingsChange


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu:a100:4(S:0)", ("a100", 4)), ("gres:gpu:v100:2", ("v100", 2)), ("gpu:3", ("", 3)),
    ("gres/gpu:a100:1,gres/shard:2", ("a100", 1)), ("", ("", 0)), ("(null)", ("", 0)),
])
def test_gres_notations(text: str, expected: tuple[str, int]) -> None:
    assert parse_gres(text) == expected


def test_hostlists() -> None:
    assert expand_hostlist("gpu[01-03,07],cpu7") == ("gpu01", "gpu02", "gpu03", "gpu07", "cpu7")
    assert expand_hostlist("") == ()


def test_the_measured_restart_delay_becomes_the_priced_one_once_three_are_known(job: Job) -> None:
    row = scheduler_settings()
    decided = timezone.now() - timedelta(seconds=40)
    RescaleEvent.objects.create(job=job, at=decided, kind=RescaleKind.RESCALE, from_gpus=2, to_gpus=4, reason="r")
    delay = measure_restart(job.pk, decided + timedelta(seconds=12))
    assert delay == pytest.approx(12.0)
    assert measure_restart(job.pk, decided - timedelta(seconds=1)) is None  # started before the decision

    assert restarts.record([12.0, 14.0], row) is None  # two are not enough
    priced = restarts.record([13.0], row)

    assert priced == 13.0
    row.refresh_from_db()
    assert row.restart_seconds == 13.0
    assert SettingsChange.objects.filter(field="restart_seconds", new_value="13.0").exists()
    assert RoundMemory.objects.get(pk=1).restarts == [12.0, 14.0, 13.0]
    assert restarts.record([13.5], row) is None  # within 10 %: the setting stays


def test_a_host_list_that_names_too_many_hosts_is_refused_not_expanded() -> None:
    from scheduler.backends.slurm.client import SlurmRefused

    with pytest.raises(SlurmRefused, match="too many hosts"):
        expand_hostlist("gpu[0-99999999999]")
    with pytest.raises(SlurmRefused):
        expand_hostlist("gpu[a-b]")


@pytest.mark.parametrize("version", ["v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"])
def test_a_job_record_of_another_shape_is_refused_by_name_not_a_crash(version: str) -> None:
    from scheduler.backends.slurm.client import ADAPTERS, SlurmRefused

    class Transport:
        def call(self, method: str, path: str) -> dict[str, object]:
            return {"jobs": [{"name": "no id"}], "nodes": [{"gres": "gpu:a100:4"}]}

    rest = ADAPTERS[version](Transport(), None)  # type: ignore[arg-type]
    with pytest.raises(SlurmRefused, match="a job record that Cluster Ops cannot read"):
        rest.jobs()
    with pytest.raises(SlurmRefused, match="a node record"):
        rest.nodes()


def test_on_slurm_rounds_place_jobs_evenly_over_nodes(db: None) -> None:
    """Slurm asks for GPUs per node: its rounds run with placement's even spread, the other back-ends without."""
    from scheduler.live.config import scheduling_config

    row = scheduler_settings()
    for executor, even in (("slurm", True), ("simulated", False)):
        row.executor = executor
        assert scheduling_config(row).cycle.even_spread is even


def test_the_reason_squeue_shows_for_a_held_job_is_one_bounded_line() -> None:
    from scheduler.backends.slurm.executor import waiting_note

    assert waiting_note(Job(pending_reason="")) == "Cluster Ops: queued"
    note = waiting_note(Job(pending_reason="waits for\n4 a100 GPUs;  quota " + "x" * 500))
    assert note.startswith("Cluster Ops: waits for 4 a100 GPUs; quota x") and "\n" not in note and len(note) <= 213


def test_sshare_and_sprio_lines_are_read_and_strangers_skipped() -> None:
    from scheduler.backends.slurm.fairness import parse_priorities, parse_shares

    shares = parse_shares([
        "root|||0.000000|99|1.000000|", " nlp||1|0.250000|48|0.490000|", "  nlp|bob|1|0.500000|48|1.000000|0.375000",
        "  research|alice|1|0.500000|nan|inf|0.125", "not|ours", "x|y|1|2|3|4|5|6",
    ])
    assert [(row.account, row.user, row.fair_share) for row in shares] == [
        ("nlp", "", None), ("nlp", "bob", 0.375), ("research", "alice", 0.125)]
    assert (shares[2].raw_usage, shares[2].effective_usage) == (None, None)  # not finite: not a number
    priorities = parse_priorities(["59660185|alice|research|1200|200|1000|0|0|0", "oops|a|b|1|1|1|1|1|1",
                                   "12|bob|nlp|1e400|0|0|0|0|0", "13|bob|nlp|7|1|2|3|1|0"])
    assert [(row.job_id, row.user, row.priority, row.fair_share) for row in priorities] == [
        (59660185, "alice", 1200, 1000), (13, "bob", 7, 2)]


def test_a_job_folder_left_by_another_job_of_the_same_id_is_moved_aside(tmp_path, settings) -> None:  # type: ignore[no-untyped-def]
    from scheduler.backends.files import checkpoint_dir, claim_job_dir

    settings.JOB_DIR = tmp_path
    first = claim_job_dir(7, "aaaaaaaaaaaa")
    checkpoint_dir(7).mkdir()
    (checkpoint_dir(7) / "step-900.pt").write_text("another job's progress")
    assert claim_job_dir(7, "aaaaaaaaaaaa") == first and (checkpoint_dir(7) / "step-900.pt").exists()  # its own

    again = claim_job_dir(7, "bbbbbbbbbbbb")  # job 7 of a new database: not the same job

    assert again == first and not checkpoint_dir(7).exists()  # it starts from nothing
    stale = [path for path in tmp_path.iterdir() if path.name.startswith("7.stale-aaaaaaaaaaaa-")]
    assert len(stale) == 1 and (stale[0] / "checkpoints" / "step-900.pt").read_text() == "another job's progress"


@pytest.mark.django_db
def test_the_mirror_writes_new_jobs_in_bulk_and_known_ones_only_when_they_changed() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduler.backends.slurm.observer import mirror_slurm_jobs
    from scheduler.backends.slurm.records import SlurmJob

    now = timezone.now()

    def pending(job_id: int, priority: int = 1) -> SlurmJob:
        return SlurmJob(id=job_id, name="queued", comment="", account="vision", user="alice", state="PENDING",
                        reason="Priority", nodes=(), gpus_per_node={}, gpu_type="a100", submitted_at=now,
                        started_at=None, ended_at=None, restarts=0, time_limit_seconds=600.0, requested_gpus=2,
                        priority=priority)

    assert mirror_slurm_jobs([pending(i) for i in range(1, 2501)], now) == 2500  # more than one query's ids
    assert Job.objects.filter(cluster_user="alice", time_limit_seconds=600, cluster_priority=1).count() == 2500
    with CaptureQueriesContext(connection) as queries:
        mirror_slurm_jobs([pending(i, priority=5 if i == 7 else 1) for i in range(1, 2501)], now)
    # The bulk update is one statement run once a changed row ("1 times: UPDATE …" as Django records it).
    updates = [q["sql"] for q in queries.captured_queries if 'UPDATE "scheduler_job"' in q["sql"]]
    assert updates and all(sql.startswith("1 times: ") for sql in updates)
    assert Job.objects.get(cluster_job_id="7").cluster_priority == 5  # the one that changed


@pytest.mark.django_db
def test_mirrored_jobs_that_left_squeue_unseen_end_as_sacct_says_or_are_marked_failed() -> None:
    from types import SimpleNamespace

    from scheduler.backends.slurm.observer import SlurmObserver, mirror_slurm_jobs
    from scheduler.backends.slurm.records import AccountedRun, SlurmJob

    now = timezone.now()
    start = now - timedelta(minutes=30)

    def running(job_id: int) -> SlurmJob:
        return SlurmJob(id=job_id, name="gone", comment="", account="vision", user="bob", state="RUNNING", reason="",
                        nodes=(), gpus_per_node={}, gpu_type="", submitted_at=start, started_at=start, ended_at=None,
                        restarts=0, requested_gpus=1)

    mirror_slurm_jobs([running(11), running(12)], start + timedelta(minutes=1))
    runs = [AccountedRun(job_id=11, account="vision", user="bob", gpus=1, started_at=start,
                         ended_at=start + timedelta(minutes=5), state="COMPLETED", name="gone", submitted_at=start)]
    client = SimpleNamespace(commands=SimpleNamespace(accounting=lambda since, until: runs))
    observer = SlurmObserver(client=client)  # type: ignore[arg-type]  # squeue lists neither any more

    observer._settle_vanished(now)

    ended, unknown = Job.objects.get(cluster_job_id="11"), Job.objects.get(cluster_job_id="12")
    assert (ended.state, ended.finished_at) == (JobState.SUCCEEDED, start + timedelta(minutes=5))
    assert unknown.state == JobState.FAILED and "neither squeue nor sacct" in unknown.error
    assert observer.notes == ["2 mirrored jobs had left Slurm's queue: 1 ended as sacct says, 1 unknown to sacct "
                              "marked failed"]
