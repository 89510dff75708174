"""The suite's prerequisites: a missing one fails its tests with what to install; only an explicit opt-out skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import prerequisites
from tests.prerequisites import OPT_OUT_VARIABLE, PREREQUISITES, Prerequisite


@pytest.fixture
def absent(monkeypatch: pytest.MonkeyPatch) -> Prerequisite:
    gone = Prerequisite("gizmo", "the gizmo tests", lambda: False, ("gizmo-tools",))
    monkeypatch.setitem(PREREQUISITES, "gizmo", gone)
    monkeypatch.delenv(OPT_OUT_VARIABLE, raising=False)
    return gone


def test_a_missing_prerequisite_fails_naming_the_package(absent: Prerequisite) -> None:
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y --no-install-recommends gizmo-tools"):
        prerequisites.require("gizmo")


def test_only_an_explicit_opt_out_skips(absent: Prerequisite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OPT_OUT_VARIABLE, "browser, gizmo")
    with pytest.raises(pytest.skip.Exception, match=OPT_OUT_VARIABLE):
        prerequisites.require("gizmo")


def test_the_runner_names_what_is_missing_and_fails(absent: Prerequisite, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(prerequisites, "missing", lambda: [absent])
    monkeypatch.setattr(prerequisites.os, "geteuid", lambda: 1000)  # not root: nothing is installed
    assert prerequisites.main() == 1
    assert "gizmo-tools" in capsys.readouterr().err
    monkeypatch.setenv(OPT_OUT_VARIABLE, "gizmo")
    assert prerequisites.main() == 0


@pytest.mark.parametrize("group", sorted(PREREQUISITES))
def test_every_prerequisite_is_present_here(group: str) -> None:
    """`make test` installed them (tests/prerequisites.py); a machine without one fails here, not by skipping."""
    prerequisites.require(group)


def test_root_installs_debian_packages_with_chromiums_recommends_only(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(prerequisites.subprocess, "run", lambda command, **_: ran.append(command))
    prerequisites.install([PREREQUISITES["browser"], PREREQUISITES["alerting"], PREREQUISITES["torch"]])
    assert ran[0][:2] == ["apt-get", "update"]
    assert ran[1][-2:] == ["--no-install-recommends", "prometheus"]
    assert ran[2][-1] == "chromium" and "--no-install-recommends" not in ran[2]
    assert ran[3][-2:] == ["-r", str(prerequisites.REPO / "requirements-node.txt")]


def test_the_trace_tests_look_where_the_product_reads_traces(settings) -> None:
    """The prerequisite check runs before Django: it must resolve TRACES_DIR as the settings do."""
    assert prerequisites.traces_dir().resolve() == Path(settings.TRACES_DIR).resolve()


def test_without_traces_the_tests_that_read_them_fail_by_name(tmp_path: Path) -> None:
    """A machine without the public traces: each trace test fails naming TRACES_DIR; none is skipped silently."""
    env = {**os.environ, "TRACES_DIR": str(tmp_path / "none"), prerequisites.OPT_OUT_VARIABLE: ""}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
                          "tests/sim/test_trace_formats.py", "-k", "cluster_sizes"],
                         cwd=prerequisites.REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "ERROR tests/sim/test_trace_formats.py::test_itp_cluster_sizes" in run.stdout  # named in the summary
    assert "TRACES_DIR set to a folder" in run.stdout
    assert "skipped" not in run.stdout
