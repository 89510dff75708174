"""The REST adapters read what each slurmrestd version sends (records as Slurm 24.11 sent them, trimmed) and the
console picks the newest version both sides speak. The real servers are exercised by the lab tests, on each
release."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler.backends.slurm.client import ADAPTERS, SlurmRefused, _adapter
from scheduler.backends.slurm.records import job_record, node_record

RUNNING_V0042 = {
    "job_id": 7, "name": "train", "comment": "cluster-ops:3:abc", "account": "research", "user_name": "alice",
    "job_state": ["RUNNING"], "state_reason": "None", "nodes": "gpu[01-02]", "tres_per_node": "gres/gpu:a100:2",
    "gres_detail": ["gpu:a100:2(IDX:0-1)", "gpu:a100:2(IDX:2-3)"],
    "submit_time": {"set": True, "infinite": False, "number": 1796588402},
    "start_time": {"set": True, "infinite": False, "number": 1796588405},
    "end_time": {"set": True, "infinite": False, "number": 1796592005},
    "time_limit": {"set": True, "infinite": False, "number": 60},
    "exit_code": {"status": ["PENDING"], "return_code": {"set": False, "infinite": False, "number": 0}},
    "restart_cnt": 1, "node_count": {"set": True, "infinite": False, "number": 2},
}


def test_a_running_job_of_v0_0_40_and_later_is_read_with_its_gpus_per_node_and_limit() -> None:
    job = job_record(RUNNING_V0042)
    assert job.state == "RUNNING" and job.user == "alice" and job.console_job_id == 3
    assert job.gpus_per_node == {"gpu01": 2, "gpu02": 2} and job.gpu_type == "a100" and job.gpus == 4
    assert job.started_at == datetime.fromtimestamp(1796588405, UTC) and job.ended_at is None
    assert job.time_limit_seconds == 3600 and job.exit_code is None and job.restarts == 1


def test_a_pending_job_keeps_its_flags_out_of_its_state_and_an_unset_limit_is_none() -> None:
    held = dict(RUNNING_V0042, job_state=["PENDING", "REQUEUED"], state_reason="JobHeldUser", nodes="",
                required_nodes="gpu03", time_limit={"set": False, "infinite": True, "number": 0})
    job = job_record(held)
    assert job.state == "PENDING" and job.held and job.started_at is None
    assert job.gpus_per_node == {"gpu03": 2} and job.time_limit_seconds is None
    assert job.expected_start == datetime.fromtimestamp(1796588405, UTC)
    assert job_record(dict(RUNNING_V0042, job_state=["COMPLETED", "COMPLETING"])).state == "COMPLETING"


def test_a_node_state_list_is_a_base_state_and_flags() -> None:
    node = node_record({"name": "gpu01", "gres": "gpu:a100:4", "state": ["IDLE", "DRAIN"], "reason": "fan",
                  "partitions": ["gpu"]})
    assert node.state == "idle" and node.flags == {"DRAIN"} and not node.usable and node.gpus == 4
    assert node_record({"name": "gpu02", "gres": "gpu:v100:4", "state": ["MIXED"]}).usable


class OpenApi:
    def __init__(self, versions: list[str]) -> None:
        self.paths = {f"/slurm/{version}/jobs/": {} for version in versions}
        self.paths["/slurmdb/v0.0.99/jobs/"] = {}  # the accounting paths do not choose the version

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        assert (method, path) == ("GET", "/openapi")
        return {"paths": self.paths}


@pytest.mark.parametrize(("offered", "chosen"), [
    (["v0.0.38"], "v0.0.38"),  # Slurm 22.05
    (["v0.0.40", "v0.0.41", "v0.0.42"], "v0.0.42"),  # Slurm 24.11
    (["v0.0.41", "v0.0.42", "v0.0.43"], "v0.0.42"),  # Slurm 25.05: the newest both sides speak
])
def test_the_newest_version_both_sides_speak_is_chosen(offered: list[str], chosen: str) -> None:
    assert _adapter(OpenApi(offered), None).version == chosen  # type: ignore[arg-type]
    assert set(ADAPTERS) >= {"v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"}


def test_a_server_that_speaks_no_version_of_ours_is_refused_naming_both_lists() -> None:
    with pytest.raises(SlurmRefused, match=r"offers v0.0.37, v0.0.39; Cluster Ops speaks v0.0.38, v0.0.40"):
        _adapter(OpenApi(["v0.0.37", "v0.0.39"]), None)  # type: ignore[arg-type]


def test_v0_0_38_records_read_alike() -> None:
    """v0.0.38 says states as words, a node's flags apart, and plain numbers."""
    job = job_record({"job_id": 8, "job_state": "RUNNING", "nodes": "gpu01", "tres_per_node": "gpu:v100:2",
                "gres_detail": ["gpu:v100:2(IDX:0-1)"], "start_time": 1796588405, "time_limit": 30,
                "exit_code": 0, "node_count": 1, "user_name": "bob"})
    assert job.state == "RUNNING" and job.gpus_per_node == {"gpu01": 2} and job.time_limit_seconds == 1800
    assert job.exit_code == 0 and job.user == "bob"
    node = node_record({"name": "gpu03", "gres": "gpu:v100:4", "state": "mixed", "state_flags": ["DRAIN"]})
    assert node.state == "mixed" and node.flags == {"DRAIN"} and not node.usable
