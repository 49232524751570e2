"""Third-party test data: where the helper looks, how tests skip without it, CI's refusal, the fetch script."""

from __future__ import annotations

import http.server
import importlib.util
import os
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from conftest import REPO
from testdata import ENV_VAR, get_test_data_dir, manifest, missing_reason

SCRIPT = REPO / "scripts" / "test_data.py"


def load_script() -> object:
    spec = importlib.util.spec_from_file_location("test_data_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_folder_is_the_variable_when_set_else_beside_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert get_test_data_dir() == tmp_path.resolve()
    monkeypatch.delenv(ENV_VAR)
    assert get_test_data_dir() == REPO.parent / "shared" / "fixtures"


def test_the_reason_names_where_it_looked_and_how_to_provide_the_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    reason = missing_reason()
    assert reason is not None and "\n" not in reason
    assert f"${ENV_VAR}={tmp_path / 'nowhere'}" in reason and "scripts/test_data.py" in reason
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "empty"))
    assert missing_reason() is not None  # an empty folder is no data either
    (tmp_path / "empty" / "ncu-csv").mkdir()
    assert missing_reason() is None


def test_the_manifest_names_each_file_once_with_a_commit_and_blob() -> None:
    files = [entry.file for entry in manifest()]
    assert len(files) == len(set(files)) >= 35
    assert {f.split("/")[0] for f in files} == {"hta", "ncu-console", "ncu-csv", "ncu-rep", "thermal", "torch-trace"}
    for entry in manifest():
        assert len(entry.commit) == 40 and len(entry.blob) == 40, entry
        assert entry.repository.count("/") == 1 and entry.licence, entry


def test_the_tests_readme_gives_every_files_source() -> None:
    readme = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
    for entry in manifest():
        row = next((line for line in readme.splitlines() if f"`{entry.file}`" in line), "")
        assert entry.repository in row and entry.commit[:12] in row and entry.source_path in row, entry.file


@pytest.mark.realdata
def test_the_folder_holds_exactly_the_manifests_files_byte_for_byte() -> None:
    script = load_script()
    folder = get_test_data_dir()
    on_disk = {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and p.relative_to(folder) != Path("README.md")
    }
    assert on_disk == {entry.file for entry in manifest()}
    for entry in manifest():
        assert script.git_blob_id((folder / entry.file).read_bytes()) == entry.blob, entry.file  # type: ignore[attr-defined]


def run_pytest(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    full.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_plain_clone_skips_the_real_data_tests_and_says_where_it_looked(tmp_path: Path) -> None:
    result = run_pytest(
        "tests/test_profile_ncu_summary.py", "-o", "addopts=", env={ENV_VAR: str(tmp_path / "none"), "CI": ""}
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "passed" not in result.stdout.splitlines()[-1] and "skipped" in result.stdout.splitlines()[-1]
    assert f"third-party test data not found at ${ENV_VAR}={tmp_path / 'none'}" in result.stdout


def test_under_ci_a_missing_folder_stops_the_session(tmp_path: Path) -> None:
    result = run_pytest(
        "tests/test_profile_ncu_summary.py", "-o", "addopts=", env={ENV_VAR: str(tmp_path / "none"), "CI": "true"}
    )
    assert result.returncode == 4  # pytest's usage error: nothing ran
    assert "CI is set and third-party test data not found" in result.stderr


def test_ci_refuses_to_start_without_the_data(tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(REPO / ".ci" / "run")],
        env={**os.environ, ENV_VAR: str(tmp_path / "none")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"ci: the third-party test data is missing at {tmp_path / 'none'}")


# --- the fetch script: its list and its refusals offline, and a real fetch from a loopback mirror ---
def fetch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_list_names_every_file_with_its_url_and_touches_no_network() -> None:
    result = fetch("--list", env={"FLEETBENCH_TEST_DATA_URL": "http://127.0.0.1:9"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(manifest())
    for line, entry in zip(lines, manifest(), strict=True):
        file, url, blob, _licence = line.split("\t")
        assert file == entry.file and blob == entry.blob
        assert url == f"http://127.0.0.1:9/{entry.repository}/{entry.commit}/{urllib.parse.quote(entry.source_path)}"


def test_the_default_source_is_each_repository_at_its_commit() -> None:
    entry = manifest()[0]
    line = fetch("--list", env={"FLEETBENCH_TEST_DATA_URL": ""}).stdout.splitlines()[0]
    assert line.split("\t")[1].startswith(f"https://raw.githubusercontent.com/{entry.repository}/{entry.commit}/")


def test_without_a_folder_to_fill_it_says_how_to_name_one() -> None:
    result = fetch(env={ENV_VAR: ""})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "test-data: name the folder to fill: scripts/test_data.py DIR (or set FLEETBENCH_TEST_DATA)"
    )


def test_offline_it_refuses_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    closed = "http://127.0.0.1:9"  # discard port: nothing listens, the connection is refused
    result = fetch(str(tmp_path / "data"), env={"FLEETBENCH_TEST_DATA_URL": closed})
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"test-data: cannot reach {closed}/") and "refused" in line.lower()
    assert not any((tmp_path / "data").rglob("*.*"))


class Mirror(http.server.BaseHTTPRequestHandler):
    """Serves the data folder laid out as <repository>/<commit>/<path>, as raw.githubusercontent.com does."""

    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        body = self.files.get(urllib.parse.unquote(self.path.lstrip("/")))
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"404: Not Found")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def mirror() -> Iterator[tuple[str, dict[str, bytes]]]:
    folder = get_test_data_dir()
    files = {
        f"{e.repository}/{e.commit}/{e.source_path}": (folder / e.file).read_bytes()
        for e in manifest()
        if (folder / e.file).is_file()
    }
    handler = type("MirrorOfTheData", (Mirror,), {"files": files})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", files
    server.shutdown()
    server.server_close()


@pytest.mark.realdata
def test_from_a_mirror_every_file_arrives_checked_and_a_second_run_keeps_them(
    mirror: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    url, _files = mirror
    dest = tmp_path / "data"
    first = fetch(str(dest), env={"FLEETBENCH_TEST_DATA_URL": url})
    assert first.returncode == 0, first.stderr
    assert f"{len(manifest())} fetched, 0 already there" in first.stdout
    for entry in manifest():
        assert (dest / entry.file).read_bytes() == (get_test_data_dir() / entry.file).read_bytes()
    second = fetch(env={"FLEETBENCH_TEST_DATA_URL": url, ENV_VAR: str(dest)})
    assert second.returncode == 0 and f"0 fetched, {len(manifest())} already there" in second.stdout


@pytest.mark.realdata
def test_a_file_that_is_not_the_published_one_is_refused_and_not_written(
    mirror: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    url, files = mirror
    entry = manifest()[3]
    key = f"{entry.repository}/{entry.commit}/{entry.source_path}"
    files[key] = files[key][:-1] + bytes([files[key][-1] ^ 1])
    dest = tmp_path / "data"
    result = fetch(str(dest), env={"FLEETBENCH_TEST_DATA_URL": url})
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"test-data: {entry.file}: {url}/") and f"expected {entry.blob}" in line
    assert not (dest / entry.file).exists()
    assert not list(dest.rglob("*.partial"))


def test_a_malformed_manifest_row_is_named(tmp_path: Path) -> None:
    script = load_script()
    bad = tmp_path / "m.tsv"
    header = "\t".join(script.COLUMNS)  # type: ignore[attr-defined]
    bad.write_text(f"{header}\nncu-csv/x.csv\towner/repo\tabc\tx.csv\t{'0' * 40}\tMIT\n", encoding="utf-8")
    with pytest.raises(script.FetchError, match=r"m\.tsv:2: .*40-hex commit"):  # type: ignore[attr-defined]
        script.read_manifest(bad)  # type: ignore[attr-defined]
    bad.write_text(f"{header}\n../x\towner/repo\t{'1' * 40}\tx\t{'0' * 40}\tMIT\n", encoding="utf-8")
    with pytest.raises(script.FetchError, match="must be a relative path"):  # type: ignore[attr-defined]
        script.read_manifest(bad)  # type: ignore[attr-defined]
