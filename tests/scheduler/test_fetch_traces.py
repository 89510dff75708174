"""``manage.py fetch_traces``: the public traces from their published archives, kept only where the checksum matches.

A local HTTP server stands in for codeload.github.com (the ``--mirror`` an air-gapped site would use); it serves
archives laid out as their authors published them: other paths than the catalogue's, a file twice, a file inside an
archive the repository holds, and members that must never be written (a link, a path out of the folder).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from scheduler.whatif import trace_catalogue, trace_download

COMMIT = "a" * 40
OTHER_COMMIT = "b" * 40
WORKLOAD = b"name,time\nj1,0\nj2,30\n"
PROFILE = b"gpus,speed\n1,1.0\n2,1.9\n"
INNER = b"job_id,duration\n1,600\n"
DERIVED = b"made by hand from the authors' constants\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tarball(prefix: str, files: dict[str, bytes], link: str | None = None) -> bytes:
    """A gzipped tar as GitHub serves a repository: every path under ``<prefix>/``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{prefix}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(f"{prefix}/{link}")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return out.getvalue()


def zipped(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


@pytest.fixture
def mirror() -> Iterator[tuple[str, dict[str, bytes], list[str]]]:
    """``(base URL, {path: body}, paths requested)``: a server laid out like codeload.github.com."""
    served: dict[str, bytes] = {}
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            requested.append(self.path)
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"not found")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", served, requested
    server.shutdown()
    server.server_close()


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings, mirror):
    """A catalogue of one folder from two repositories, both served by the mirror; an empty TRACES_DIR."""
    base, served, requested = mirror
    served[f"/someone/artifact/tar.gz/{COMMIT}"] = tarball(f"artifact-{COMMIT}", {
        "simulator/workloads/workload-1.csv": WORKLOAD,  # renamed in the catalogue
        "benchmark/workloads/workload-1.csv": WORKLOAD,  # the same file published twice
        "simulator/traces/profile.csv": PROFILE,
        "data/raw.zip": zipped({"raw/cluster01.csv": INNER}),  # an archive the repository holds
        "../../outside.csv": PROFILE,  # a member that climbs out: matched by checksum, written only where catalogued
        "README.md": b"# not a trace\n",
    }, link="simulator/traces/evil.csv")
    served[f"/other/repo/tar.gz/{OTHER_COMMIT}"] = tarball(f"repo-{OTHER_COMMIT}", {"unrelated.txt": b"x\n"})
    catalogue = {"demo": {
        "source": "someone/artifact @ aaaaaaa",
        "archives": [f"someone/artifact@{COMMIT}", f"other/repo@{OTHER_COMMIT}"],
        "files": {"workloads-1.0/workload-1.csv": sha(WORKLOAD), "traces/profile.csv": sha(PROFILE),
                  "raw/cluster01.csv": sha(INNER)},
    }}
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(catalogue))
    monkeypatch.setattr(trace_catalogue, "CATALOGUE", path)
    settings.TRACES_DIR = tmp_path / "traces"
    return settings.TRACES_DIR, base, served, requested


def fetch_traces(*args: str) -> str:
    out = StringIO()
    call_command("fetch_traces", *args, stdout=out)
    return out.getvalue()


def test_every_catalogued_file_is_found_by_checksum_under_its_published_path(published) -> None:
    traces, base, _, requested = published
    out = fetch_traces("--mirror", base)
    assert out == "demo: 3 written, 0 already in place, 0 not found in the published archives\n"
    assert (traces / "demo/workloads-1.0/workload-1.csv").read_bytes() == WORKLOAD
    assert (traces / "demo/raw/cluster01.csv").read_bytes() == INNER
    assert all(result.ok for result in trace_catalogue.check(traces))
    assert requested == [f"/someone/artifact/tar.gz/{COMMIT}"]  # all found in the first: the second never asked
    written = sorted(str(p.relative_to(traces)) for p in traces.rglob("*") if p.is_file())
    assert written == ["demo/raw/cluster01.csv", "demo/traces/profile.csv", "demo/workloads-1.0/workload-1.csv"]
    assert not (traces.parent / "outside.csv").exists()


def test_a_second_run_keeps_what_is_intact_and_replaces_what_changed(published) -> None:
    traces, base, _, _ = published
    fetch_traces("--mirror", base)
    (traces / "demo/traces/profile.csv").write_bytes(b"gpus,speed\n1,9.9\n")
    out = fetch_traces("--mirror", base)
    assert out == "demo: 1 written, 2 already in place, 0 not found in the published archives\n"
    assert (traces / "demo/traces/profile.csv").read_bytes() == PROFILE


def test_a_file_not_published_in_that_form_is_named_and_the_command_fails(published, tmp_path: Path) -> None:
    traces, base, _, requested = published
    catalogue = json.loads(trace_catalogue.CATALOGUE.read_text())
    catalogue["demo"]["files"]["derived.csv"] = sha(DERIVED)
    trace_catalogue.CATALOGUE.write_text(json.dumps(catalogue))
    out = StringIO()
    with pytest.raises(CommandError, match="demo incomplete"):
        call_command("fetch_traces", "--mirror", base, stdout=out)
    assert "3 written" in out.getvalue() and "not found: derived.csv" in out.getvalue()
    assert len(requested) == 2  # both published archives were searched
    assert not (traces / "demo/derived.csv").exists()


def test_an_archive_that_cannot_be_downloaded_is_named_and_nothing_is_written(published) -> None:
    traces, base, served, _ = published
    served.clear()
    out = StringIO()
    with pytest.raises(CommandError, match="demo incomplete"):
        call_command("fetch_traces", "--mirror", base, stdout=out)
    assert f"download failed: {base}/someone/artifact/tar.gz/{COMMIT}: Not Found" in out.getvalue()
    assert not traces.exists() or not any(p.is_file() for p in traces.rglob("*"))


def test_a_download_that_is_not_an_archive_is_named(published) -> None:
    traces, base, served, _ = published
    served[f"/someone/artifact/tar.gz/{COMMIT}"] = b"<html>rate limited</html>"
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("fetch_traces", "--mirror", base, stdout=out)
    assert f"someone/artifact@{COMMIT}: not a readable archive" in out.getvalue()
    assert "rate limited" not in out.getvalue()  # names, never contents


def test_arguments_are_checked_before_any_download(published) -> None:
    _, base, _, requested = published
    with pytest.raises(CommandError, match="--mirror: 'file:///etc' is not an http:// or https:// address"):
        fetch_traces("--mirror", "file:///etc")
    with pytest.raises(CommandError, match="no trace folder 'nope' in the catalogue; known: demo"):
        fetch_traces("--mirror", base, "--folder", "nope")
    assert requested == []


def test_an_archive_that_is_not_a_repository_at_a_commit_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"demo": {"source": "x", "archives": ["someone/repo@main"], "files": {}}}))
    with pytest.raises(ValueError, match="'someone/repo@main' is not owner/name@<40-hex commit>"):
        trace_catalogue.load_catalogue(bad)


def test_github_is_the_default_source() -> None:
    assert trace_download.archive_url(f"petuum/adaptdl@{COMMIT}") == (
        f"https://codeload.github.com/petuum/adaptdl/tar.gz/{COMMIT}")


def test_every_catalogued_folder_names_where_it_was_published() -> None:
    catalogue = trace_catalogue.load_catalogue()
    assert all(entry["archives"] for entry in catalogue.values())
