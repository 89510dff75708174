"""The Slurm lab (scripts/slurm_lab.py) starts from any checkout and fails clean: a failed start stops what it
started and leaves nothing half-made, and the next start works."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from tests import prerequisites
from tests.scripts import load_script

PORT = 36817  # away from the suite's lab (26817) and `make slurm-lab`'s (16817)


def test_a_checkout_closed_to_other_users_gets_a_lab_folder_they_can_enter(tmp_path: Path) -> None:
    """MariaDB and slurmrestd run as their own users: under a 0700 home they could not enter var/slurm-lab."""
    module = load_script("slurm_lab")
    home = tmp_path / "home" / "someone"
    checkout = home / "cluster-ops"
    checkout.mkdir(parents=True)
    home.chmod(0o700)
    root = module.lab_root(None, checkout)
    assert root.parent == module.SHARED_LABS and module.enterable_by_all(root.parent)
    assert root == module.lab_root(None, checkout)  # the same folder for `make slurm-lab-stop`
    assert root != module.lab_root(None, tmp_path / "another")
    assert module.lab_root(None, Path("/srv/cluster-ops")) == Path("/srv/cluster-ops/var/slurm-lab")
    assert module.lab_root(str(tmp_path / "chosen")) == tmp_path / "chosen"  # SLURM_LAB_DIR as given


@pytest.mark.needs("slurm")
def test_a_lab_dir_closed_to_other_users_is_refused_before_anything_starts(tmp_path: Path) -> None:
    prerequisites.require("slurm")
    module = load_script("slurm_lab")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    lab = module.Lab(closed / "lab", PORT)
    with pytest.raises(SystemExit, match="is closed to other users"):
        module.start(lab)
    assert not (closed / "lab").exists()


@pytest.mark.needs("slurm")
def test_a_failed_start_stops_what_it_started_and_the_next_start_works(monkeypatch: pytest.MonkeyPatch) -> None:
    prerequisites.require("slurm")
    if os.geteuid() != 0:
        pytest.fail("the Slurm lab starts its daemons as root (as .ci/run and `make test` run)", pytrace=False)
    module = load_script("slurm_lab")
    root = Path(tempfile.gettempdir()) / f"cluster-ops-slurm-lab-{PORT}"
    shutil.rmtree(root, ignore_errors=True)
    lab = module.Lab(root, PORT)
    half_made = lab.database / "ibdata1"  # what a start that died in mariadb-install-db left behind
    half_made.parent.mkdir(parents=True)
    half_made.write_bytes(b"half")
    blocker = socket.socket()  # slurmctld's port taken: it cannot start, after munged, MariaDB and slurmdbd have
    blocker.bind(("127.0.0.1", lab.ctld_port))
    blocker.listen()
    try:
        with pytest.raises(SystemExit, match=f"port {lab.ctld_port} \\(for slurmctld\\) is taken"):
            module.start(lab)
    finally:
        blocker.close()
    assert not list((root / "run").glob("*.lab-pid"))
    assert not [port for port in (lab.db_port, lab.dbd_port) if module.port_open(port)]
    assert (lab.database / module.DATABASE_READY).exists()  # made anew, not the half-made one
    try:
        module.start(lab)
        assert module.port_open(lab.rest_port) and module.port_open(lab.ctld_port)
    finally:
        module.stop(lab, quiet=True)
    assert not [port for port in (lab.db_port, lab.dbd_port, lab.ctld_port, lab.rest_port) if module.port_open(port)]
    shutil.rmtree(root, ignore_errors=True)


def test_stop_and_env_speak_to_the_release_the_folder_was_started_with(tmp_path: Path) -> None:
    """`make slurm-lab-stop` without SLURM_LAB_RELEASE stops a 22.05 lab as 22.05 (its root's munged and mounts)."""
    module = load_script("slurm_lab")
    lab = module.Lab(tmp_path / "lab", PORT)
    assert lab.release.name == module.DEFAULT_RELEASE and lab.as_started() == lab  # never started: as asked
    (tmp_path / "lab" / "run").mkdir(parents=True)
    (tmp_path / "lab" / "run" / "release").write_text("22.05\n")
    assert lab.as_started().release == module.RELEASES["22.05"]
    assert lab.as_started().database != lab.database  # each release keeps its own accounting tables
