"""A real single-host Slurm for the Slurm back-end's tests, started once per session by ``scripts/slurm_lab.py``.

Nothing here is faked: Debian's slurmctld, four slurmd with fake GPU devices (character devices: Slurm needs a
device file per GPU, and there is no GPU), slurmdbd over MariaDB and slurmrestd with JWT. Each test leaves the
lab as it found it: its Slurm jobs cancelled, its nodes resumed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from scheduler.live.config import scheduler_settings
from scheduler.models import ExecutorKind, Tenant
from tests import prerequisites
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
LAB_PORT = 26817  # away from `make slurm-lab`'s 16817, so a lab an operator runs is left alone
# Every Slurm test runs against each release; CI's second pass, which checks another database, takes one.
RELEASES = tuple(os.environ.get("SLURM_TEST_RELEASES", "22.05,24.11").split(","))
pytestmark = pytest.mark.needs("slurm")


class RunningLab:
    def __init__(self, module: ModuleType, lab: Any) -> None:
        self.module, self.lab = module, lab
        self.env = module.slurm_env(lab)

    def run(self, *args: str, check: bool = True) -> str:
        # In the lab's folder: sbatch writes a job's output (slurm-<id>.out) where it was called.
        done = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=60, cwd=self.lab.root)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def squeue(self, job_id: int | str) -> dict[str, str]:
        """``%T %b %N %r`` of one job: state, GRES per node, nodes, reason."""
        out = self.run("squeue", "-h", "-j", str(job_id), "-o", "%T|%b|%N|%r", check=False).strip()
        if not out:
            return {}
        state, gres, nodes, reason = out.split("|")
        return {"state": state, "gres": gres, "nodes": nodes, "reason": reason}

    def stop_controller(self) -> None:
        self.module.stop_controller(self.lab)

    def start_controller(self) -> None:
        self.module.start_controller(self.lab)

    def clean(self) -> None:
        """Cancel every job, resume every node, and wait until the nodes are free."""
        jobs = self.run("squeue", "-h", "-o", "%i", check=False).split()  # every user's (the jobs run as owners)
        if jobs:
            self.run("scancel", "--full", *jobs, check=False)
        for name, _, _ in self.module.NODES:
            self.run("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = self.run("squeue", "-h", "-o", "%T", check=False).split()
            if not [state for state in out if state not in {"CANCELLED", "COMPLETED", "FAILED"}]:
                return
            time.sleep(0.5)


@pytest.fixture(scope="session", params=RELEASES)
def slurm_lab(request: pytest.FixtureRequest) -> Iterator[RunningLab]:
    """One lab per release; pytest runs every Slurm test on the first, stops it, then on the next."""
    prerequisites.require("slurm")
    if os.geteuid() != 0:
        pytest.fail("the Slurm lab starts its daemons as root (as .ci/run and `make test` run)", pytrace=False)
    module = load_script("slurm_lab")
    port = LAB_PORT + 100 * RELEASES.index(request.param)
    # Not under pytest's own temporary folder (0700): slurmrestd and MariaDB run as their own users and read it.
    root = Path(tempfile.gettempdir()) / f"cluster-ops-slurm-lab-{port}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(mode=0o755)
    lab = module.Lab(root, port, module.RELEASES[request.param])
    module.start(lab)
    try:
        yield RunningLab(module, lab)
    finally:
        module.stop(lab, quiet=True)


@pytest.fixture
def slurm(slurm_lab: RunningLab, settings: Any, tmp_path: Path, db: None,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningLab]:
    """The lab, the console pointed at it (schedule mode, Tiresias), and a clean queue after the test."""
    environment = slurm_lab.lab.environment()
    if "PATH" in environment:  # the release's own commands, as the lab's `export` lines set them
        monkeypatch.setenv("PATH", environment["PATH"])
    settings.SLURM_REST_URL = environment["SLURM_REST_URL"]
    settings.SLURM_JWT_FILE = environment["SLURM_JWT_FILE"]
    settings.SLURM_CONF = environment["SLURM_CONF"]
    settings.SLURM_SCRIPT_DIR = environment["SLURM_SCRIPT_DIR"]
    settings.SLURM_USER = "root"
    # A folder the lab's users can reach (pytest's own is closed to them): jobs run as their owners.
    settings.JOB_DIR = slurm_lab.lab.path("console-jobs", tmp_path.name)
    row = scheduler_settings()
    row.executor, row.policy = ExecutorKind.SLURM, "tiresias"
    row.save()
    for account in slurm_lab.module.ACCOUNTS:
        Tenant.objects.get_or_create(name=account)
    try:
        yield slurm_lab
    finally:
        slurm_lab.clean()


def training_command(steps: int = 4000, step_seconds: float = 0.05) -> str:
    """The example elastic job: checkpoints every 10 steps and on SIGTERM, resumes from its checkpoint."""
    return (f"{sys.executable} {REPO / 'examples' / 'elastic_train.py'} --steps {steps} "
            f"--step-seconds {step_seconds} --checkpoint-every 10 --log-every 10 --report-every 1000000")


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"no {what} within {timeout:.0f} s")
