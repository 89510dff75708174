"""The public traces Cluster Ops reads, as published: each folder's source and every file's SHA-256.

``TRACES_DIR`` holds one folder per source (``pollux``, ``sia``, ``philly``…), each as its authors published it at
one commit (the folder's ``PROVENANCE.md`` says where each file comes from and how it was unpacked). The catalogue
(``trace_catalogue.json`` beside this module) records every file's checksum, so a copy on any machine can be
checked against the copy the product was validated on (``manage.py check_traces``): a file missing, cut short or
changed is named, never read as if it were the published one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

CATALOGUE = Path(__file__).with_name("trace_catalogue.json")
CHUNK = 1 << 20
# Where a folder's files were published: a GitHub repository at one commit.
ARCHIVE = re.compile(
    r"^(?P<owner>[A-Za-z0-9][A-Za-z0-9-]{0,38})/(?P<name>[A-Za-z0-9._-]{1,100})@(?P<commit>[0-9a-f]{40})$")


@dataclass(frozen=True)
class FolderCheck:
    """What ``TRACES_DIR/<folder>`` holds against the catalogue."""

    folder: str
    source: str
    files: int
    missing: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.different


def load_catalogue(path: Path | None = None) -> dict[str, dict]:
    """``{folder: {"source": …, "files": {relative path: sha256}}}`` (``CATALOGUE`` by default)."""
    catalogue = json.loads((path or CATALOGUE).read_text())
    for folder, entry in catalogue.items():
        for relative in entry["files"]:
            confined(folder, relative)
        for archive in entry.get("archives", []):
            if not ARCHIVE.match(archive):
                raise ValueError(f"trace catalogue: {folder}'s archive {archive!r} is not owner/name@<40-hex commit>")
    return catalogue


def confined(folder: str, relative: str) -> PurePosixPath:
    """A catalogue path: relative, inside its folder, never ``..``."""
    path = PurePosixPath(folder) / relative
    if path.is_absolute() or ".." in path.parts or "/" in folder:
        raise ValueError(f"trace catalogue: {folder}/{relative} is not a path inside TRACES_DIR")
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check(traces_dir: Path, folders: Iterable[str] | None = None,
          catalogue: dict[str, dict] | None = None) -> list[FolderCheck]:
    """Each catalogued folder (or those named) under ``traces_dir``, file by file. Files the catalogue does not name
    are left alone: a user may keep traces of their own beside the published ones."""
    catalogue = catalogue if catalogue is not None else load_catalogue()
    chosen = list(folders) if folders is not None else sorted(catalogue)
    unknown = [name for name in chosen if name not in catalogue]
    if unknown:
        raise KeyError(f"no trace folder {unknown[0]!r} in the catalogue; known: {', '.join(sorted(catalogue))}")
    results = []
    for name in chosen:
        entry = catalogue[name]
        missing, different = [], []
        for relative, expected in sorted(entry["files"].items()):
            path = traces_dir / confined(name, relative)
            if not path.is_file():
                missing.append(relative)
            elif sha256(path) != expected:
                different.append(relative)
        results.append(FolderCheck(name, entry["source"], len(entry["files"]), missing, different))
    return results


def record(traces_dir: Path, folders: dict[str, dict], path: Path | None = None) -> dict[str, dict]:
    """Write the catalogue from a reference copy: every file of each named folder but its PROVENANCE notes.
    ``folders`` maps each folder to its ``source`` (words) and ``archives`` (``owner/name@commit``), kept as given."""
    catalogue = {}
    for folder, described in sorted(folders.items()):
        root = traces_dir / folder
        files = {str(p.relative_to(root).as_posix()): sha256(p) for p in sorted(root.rglob("*"))
                 if p.is_file() and not p.name.endswith(".md")}
        catalogue[folder] = {"source": described["source"], "archives": list(described.get("archives", [])),
                             "files": files}
    path = path or CATALOGUE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(catalogue, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)  # never half a catalogue
    return catalogue
