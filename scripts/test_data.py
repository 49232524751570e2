"""Fetch the third-party test data from the public repositories that published it, by commit.

The real-data tests (pytest marker `realdata`) read files that other people made and published:
Nsight Compute reports, `ncu` exports and console logs, PyTorch traces, device telemetry. They are not
shipped with fleetbench; `tests/third-party-data.tsv` lists each with its repository, commit, path and
git blob id. This script downloads each from `https://raw.githubusercontent.com/<repo>/<commit>/<path>`,
checks its git blob id (what `git hash-object` gives), and only then moves it into place, so the folder
never holds a partial or different file. Files already there with the right blob are kept.

    .venv/bin/python scripts/test_data.py DIR      # or: make test-data TEST_DATA=DIR
    export FLEETBENCH_TEST_DATA=DIR                # then `make test` runs the real-data tests
    .venv/bin/python scripts/test_data.py --list   # what it would fetch, from where (no network)

`FLEETBENCH_TEST_DATA_URL` replaces the raw.githubusercontent.com address (a mirror of the same
layout: `<url>/<repo>/<commit>/<path>`).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from fleetbench.envvars import TEST_DATA_ENV, TEST_DATA_URL_ENV

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "third-party-data.tsv"
DEFAULT_URL = "https://raw.githubusercontent.com"
TIMEOUT_S = 30
COLUMNS = ["file", "repository", "commit", "source_path", "blob", "licence"]


class FetchError(Exception):
    """One line for the user: what failed and what to do."""


@dataclass(frozen=True)
class Entry:
    """One row of the manifest."""

    file: str
    repository: str
    commit: str
    source_path: str
    blob: str
    licence: str

    def url(self, base: str) -> str:
        """Where the file is published at its commit."""
        return f"{base.rstrip('/')}/{self.repository}/{self.commit}/{urllib.parse.quote(self.source_path)}"


def read_manifest(path: Path = MANIFEST) -> list[Entry]:
    """The manifest's rows; a malformed row is a FetchError naming its line."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t")
        if rows.fieldnames != COLUMNS:
            raise FetchError(f"{path}: columns {rows.fieldnames}, expected {COLUMNS}")
        entries = []
        for number, row in enumerate(rows, start=2):
            if any(not row.get(column) for column in COLUMNS) or len(row["blob"]) != 40 or len(row["commit"]) != 40:
                raise FetchError(f"{path}:{number}: a row needs every column, a 40-hex commit and blob: {row}")
            if Path(row["file"]).is_absolute() or ".." in Path(row["file"]).parts:
                raise FetchError(f"{path}:{number}: file {row['file']!r} must be a relative path inside the folder")
            entries.append(Entry(**row))
        return entries


def git_blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def download(url: str) -> bytes:
    """The bytes at `url`; any failure is a FetchError with the reason in one line."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(f"cannot reach {url} ({reason})") from None


def place(entry: Entry, data: bytes, dest: Path) -> None:
    """Write `data` as dest/entry.file whole or not at all: a temporary file beside it, then a rename."""
    target = dest / entry.file
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def fetch(entries: list[Entry], dest: Path, base: str) -> tuple[int, int]:
    """Fetch every entry not already in `dest` with its blob id; returns (fetched, already there)."""
    fetched = kept = 0
    for entry in entries:
        target = dest / entry.file
        if target.is_file() and git_blob_id(target.read_bytes()) == entry.blob:
            kept += 1
            continue
        url = entry.url(base)
        data = download(url)
        got = git_blob_id(data)
        if got != entry.blob:
            raise FetchError(f"{entry.file}: {url} has blob {got}, expected {entry.blob}; nothing written for it")
        place(entry, data, dest)
        fetched += 1
        print(f"test-data: {entry.file} <- {entry.repository}@{entry.commit[:12]}")
    return fetched, kept


def main(argv: list[str] | None = None) -> int:
    """Fetch (or list) the third-party test data; one line and exit 1 (2: a usage error) on failure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", nargs="?", help="folder to fill (default: $FLEETBENCH_TEST_DATA)")
    parser.add_argument("--list", action="store_true", help="print what would be fetched, from where, and stop")
    args = parser.parse_args(argv)
    base = os.environ.get(TEST_DATA_URL_ENV) or DEFAULT_URL
    try:
        entries = read_manifest()
        if args.list:
            for entry in entries:
                print(f"{entry.file}\t{entry.url(base)}\t{entry.blob}\t{entry.licence}")
            return 0
        dest_name = args.dest or os.environ.get(TEST_DATA_ENV, "")
        if not dest_name:
            print(
                "test-data: name the folder to fill: scripts/test_data.py DIR (or set FLEETBENCH_TEST_DATA)",
                file=sys.stderr,
            )
            return 2
        dest = Path(dest_name).expanduser()
        if dest.exists() and not dest.is_dir():
            print(f"test-data: {dest} is not a folder", file=sys.stderr)
            return 2
        fetched, kept = fetch(entries, dest, base)
    except FetchError as exc:
        print(f"test-data: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"test-data: {exc.filename or dest_name}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"test-data: {fetched} fetched, {kept} already there, in {dest.resolve()}")
    print(f"test-data: export FLEETBENCH_TEST_DATA={dest.resolve()}  # then `make test` runs the real-data tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
