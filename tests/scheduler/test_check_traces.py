"""``manage.py check_traces``: TRACES_DIR's public traces against their recorded checksums, file by file."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from scheduler.whatif import trace_catalogue


@pytest.fixture
def catalogued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings) -> Path:
    """A TRACES_DIR of two small files, and a catalogue recorded from it."""
    traces = tmp_path / "traces"
    (traces / "demo" / "workloads").mkdir(parents=True)
    (traces / "demo" / "workloads" / "w1.csv").write_text("name,time\nj1,0\n")
    (traces / "demo" / "profile.csv").write_text("gpus,speed\n1,1.0\n")
    (traces / "demo" / "PROVENANCE.md").write_text("where it came from\n")
    monkeypatch.setattr(trace_catalogue, "CATALOGUE", tmp_path / "catalogue.json")
    trace_catalogue.record(traces, {"demo": {"source": "someone/repo @ abc1234"}}, tmp_path / "catalogue.json")
    settings.TRACES_DIR = traces
    return traces


def run(*args: str) -> str:
    out = StringIO()
    call_command("check_traces", *args, stdout=out)
    return out.getvalue()


def test_a_copy_as_published_is_ok(catalogued: Path) -> None:
    assert run() == "demo: ok (2 files; someone/repo @ abc1234)\n"  # its notes are not part of the data


def test_a_missing_or_changed_file_is_named_and_fails(catalogued: Path) -> None:
    (catalogued / "demo" / "profile.csv").unlink()
    (catalogued / "demo" / "workloads" / "w1.csv").write_text("name,time\nj1,1\n")
    out = StringIO()
    with pytest.raises(CommandError, match="demo not as published"):
        call_command("check_traces", stdout=out)
    assert "1 of 2 files missing, 1 different" in out.getvalue()
    assert "missing: profile.csv" in out.getvalue() and "different: workloads/w1.csv" in out.getvalue()
    assert "j1,1" not in out.getvalue()  # names, never contents


def test_an_unknown_folder_is_named_with_the_known_ones(catalogued: Path) -> None:
    with pytest.raises(CommandError, match="no trace folder 'nope' in the catalogue; known: demo"):
        run("--folder", "nope")


def test_a_catalogue_path_out_of_its_folder_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"demo": {"source": "x", "files": {"../../etc/passwd": "0" * 64}}}))
    with pytest.raises(ValueError, match="not a path inside TRACES_DIR"):
        trace_catalogue.load_catalogue(bad)


@pytest.mark.needs("traces")
def test_the_traces_here_are_the_published_ones() -> None:
    """The copy the product was validated on matches the catalogue, every folder and file."""
    assert all(result.ok for result in trace_catalogue.check(Path(django_settings.TRACES_DIR)))
