"""The public traces fetched from where their authors published them, each file checked against the catalogue.

Each catalogued folder names the repositories it comes from at one commit (``archives`` in ``trace_catalogue.json``:
``owner/name@commit``). Fetching a folder downloads each repository's archive at that commit and keeps every file,
at any depth and inside the archives it holds (``.tar.gz``, ``.tgz``, ``.tar``, ``.zip``), whose SHA-256 is one the
folder's catalogue records; it is written under the catalogued name. Matching by checksum rather than by path is what
makes this safe: a file is written only if it is, byte for byte, the file the product was validated on, and the
renames the folders' ``PROVENANCE.md`` describe need no table of their own.

Files the authors did not publish in that form (a header added, a table cut from a larger download) are named as not
found; their ``PROVENANCE.md`` says how they were made. Nothing is half-written: a file is written to a temporary
name beside its place and renamed once its checksum is known to match.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from scheduler.whatif.trace_catalogue import ARCHIVE, confined, load_catalogue

# GitHub serves a repository at any commit as a tarball at <base>/<owner>/<name>/tar.gz/<commit>.
GITHUB_ARCHIVES = "https://codeload.github.com"
MAX_ARCHIVE_BYTES = 4 << 30  # the largest published repository archive a folder needs is well under this
MAX_MEMBER_BYTES = 256 << 20  # a file (or an archive inside the archive) is read into memory only below this
INNER_ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")
TIMEOUT_SECONDS = 60  # per network read, not for the whole download
CHUNK = 1 << 20


class DownloadError(Exception):
    """An archive could not be downloaded or read; the message names the archive, never its contents."""


@dataclass
class FolderFetch:
    """What fetching one folder wrote, found already in place, and could not find."""

    folder: str
    written: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # archives that could not be downloaded or read, and why

    @property
    def ok(self) -> bool:
        return not self.not_found and not self.errors


def archive_url(archive: str, base: str = GITHUB_ARCHIVES) -> str:
    """The tarball address of ``owner/name@commit`` under ``base`` (GitHub's, or a mirror laid out like it)."""
    match = ARCHIVE.match(archive)
    if not match:
        raise ValueError(f"trace catalogue: archive {archive!r} is not owner/name@<40-hex commit>")
    return f"{base.rstrip('/')}/{match['owner']}/{match['name']}/tar.gz/{match['commit']}"


def check_mirror(base: str) -> str:
    """An ``http(s)://`` address, or ``ValueError`` naming the field."""
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--mirror: {base!r} is not an http:// or https:// address")
    return base


def fetch(traces_dir: Path, folders: Iterable[str] | None = None, mirror: str = GITHUB_ARCHIVES,
          catalogue: dict[str, dict] | None = None) -> list[FolderFetch]:
    """Fetch each catalogued folder (or those named) into ``traces_dir``. Files already there with the recorded
    checksum are kept; one whose checksum differs is replaced by the published one."""
    catalogue = catalogue if catalogue is not None else load_catalogue()
    chosen = list(folders) if folders is not None else sorted(catalogue)
    unknown = [name for name in chosen if name not in catalogue]
    if unknown:
        raise KeyError(f"no trace folder {unknown[0]!r} in the catalogue; known: {', '.join(sorted(catalogue))}")
    return [_fetch_folder(traces_dir, name, catalogue[name], mirror) for name in chosen]


def _fetch_folder(traces_dir: Path, folder: str, entry: dict, mirror: str) -> FolderFetch:
    result = FolderFetch(folder)
    wanted: dict[str, list[str]] = {}  # sha256 → the catalogued names with it (a file may be published twice)
    for relative, digest in sorted(entry["files"].items()):
        if _matches(traces_dir / confined(folder, relative), digest):
            result.already.append(relative)
        else:
            wanted.setdefault(digest, []).append(relative)
    for archive in entry.get("archives", []) if wanted else []:
        try:
            with _download(archive_url(archive, mirror)) as stream:
                # Each file is written as it is found: what came before a broken end is checked and kept.
                for digest, data in _published_files(stream, archive, set(wanted)):
                    for relative in wanted.pop(digest, []):  # a file published twice is written once
                        _write(traces_dir / confined(folder, relative), data)
                        result.written.append(relative)
        except DownloadError as error:
            result.errors.append(str(error))
        if not wanted:
            break
    result.not_found = sorted(relative for names in wanted.values() for relative in names)
    result.written.sort()
    return result


def _matches(path: Path, digest: str) -> bool:
    if not path.is_file():
        return False
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest() == digest


def _download(url: str) -> IO[bytes]:
    """The archive at ``url`` in a temporary file (deleted when closed), at most ``MAX_ARCHIVE_BYTES``."""
    spool = tempfile.TemporaryFile()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - https or the mirror
            size = 0
            while chunk := response.read(CHUNK):
                size += len(chunk)
                if size > MAX_ARCHIVE_BYTES:
                    raise DownloadError(f"{url}: larger than {MAX_ARCHIVE_BYTES >> 30} GiB")
                spool.write(chunk)
    except DownloadError:
        spool.close()
        raise
    except (OSError, ValueError) as error:  # URLError and HTTPError are OSErrors
        spool.close()
        raise DownloadError(f"{url}: {getattr(error, 'reason', None) or type(error).__name__}") from None
    spool.seek(0)
    return spool


def _published_files(stream: IO[bytes], archive: str, digests: set[str]) -> Iterator[tuple[str, bytes]]:
    """``(sha256, bytes)`` of each regular file in the archive (and in the archives it holds) whose checksum is
    one of ``digests``."""
    try:
        with tarfile.open(fileobj=stream, mode="r:*") as tar:
            yield from _from_tar(tar, digests, depth=0)
    except (tarfile.TarError, EOFError, OSError, zipfile.BadZipFile) as error:
        raise DownloadError(f"{archive}: not a readable archive ({type(error).__name__})") from None


def _from_tar(tar: tarfile.TarFile, digests: set[str], depth: int) -> Iterator[tuple[str, bytes]]:
    for member in tar:
        if not member.isfile():  # links, devices and folders are never written
            continue
        source = tar.extractfile(member)
        if source is None:
            continue
        yield from _from_member(member.name, member.size, source, digests, depth)


def _from_zip(archive: zipfile.ZipFile, digests: set[str], depth: int) -> Iterator[tuple[str, bytes]]:
    for info in archive.infolist():
        if info.is_dir():
            continue
        with archive.open(info) as source:
            yield from _from_member(info.filename, info.file_size, source, digests, depth)


def _from_member(name: str, size: int, source: IO[bytes], digests: set[str],
                 depth: int) -> Iterator[tuple[str, bytes]]:
    if size > MAX_MEMBER_BYTES:
        return  # no catalogued trace file is this large; never held in memory
    data = source.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest in digests:
        yield digest, data
    if depth == 0 and name.lower().endswith(INNER_ARCHIVES):
        yield from _from_inner(name, data, digests, depth + 1)


def _from_inner(name: str, data: bytes, digests: set[str], depth: int) -> Iterator[tuple[str, bytes]]:
    """Files inside an archive the repository holds; one that is not readable is passed over (it is only data)."""
    try:
        if name.lower().endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                yield from _from_zip(archive, digests, depth)
        else:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                yield from _from_tar(tar, digests, depth)
    except (tarfile.TarError, EOFError, OSError, zipfile.BadZipFile):
        return


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
