"""slurmrestd's v0.0.40, v0.0.41 and v0.0.42 (Slurm 23.11 to 25.05; Debian 13's 24.11 serves all three): one
adapter, since the three agree on everything Cluster Ops reads and sends.

What changed from v0.0.38 (``rest_v0038``): the records' states and numbers (read alike by ``records``), a job's
environment is a list of ``NAME=value`` and its GPUs are ``tres_per_node``, and a job can be updated: placing,
releasing and holding need no Slurm command here. Requeueing still does (``scontrol requeuehold``): no REST version
has that verb.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from scheduler.backends.slurm.records import JobSpec
from scheduler.backends.slurm.rest_v0038 import RestV0038


class RestV0040(RestV0038):
    """v0.0.40; ``RestV0041`` and ``RestV0042`` differ only by name."""

    version = "v0.0.40"
    trailing = "/"

    def _description(self, spec: JobSpec) -> dict[str, Any]:
        environment = dict(spec.environment) or {"PATH": "/usr/bin:/bin"}
        job: dict[str, Any] = {
            "name": spec.name, "account": spec.account, "comment": spec.comment, "hold": True, "requeue": True,
            "tres_per_node": f"gres/{spec.gres}", "current_working_directory": spec.working_directory,
            "standard_output": spec.output, "standard_error": spec.output, "open_mode": ["APPEND"],
            "environment": [f"{name}={value}" for name, value in environment.items()],
        }
        if spec.time_limit_minutes:
            job["time_limit"] = _number(spec.time_limit_minutes)
        return job

    def place(self, job_id: int, gpus_per_node: Mapping[str, int], gpu_type: str) -> None:
        """Pin a pending job to exactly these nodes and GPUs per node, eligible now."""
        per_node = max(gpus_per_node.values())  # one count for every node: placement spreads evenly on Slurm
        gres = f"gres/gpu:{gpu_type}:{per_node}" if gpu_type else f"gres/gpu:{per_node}"
        self._update(job_id, {"required_nodes": list(gpus_per_node), "minimum_nodes": len(gpus_per_node),
                              "maximum_nodes": len(gpus_per_node), "tres_per_node": gres,
                              "begin_time": _number(int(time.time()))})

    def release(self, job_id: int) -> None:
        self._update(job_id, {"hold": False})

    def hold(self, job_id: int) -> None:
        self._update(job_id, {"hold": True})

    def note(self, job_id: int, text: str) -> None:
        self._update(job_id, {"admin_comment": text})

    def _update(self, job_id: int, changes: Mapping[str, Any]) -> None:
        self.transport.call("POST", f"/slurm/{self.version}/job/{int(job_id)}", dict(changes))


class RestV0041(RestV0040):
    version = "v0.0.41"


class RestV0042(RestV0040):
    version = "v0.0.42"


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}
