"""Telemetry faults that must neither hide nor lose metrics, through the real CLI and real servers.

Bad spool entries are set aside in `rejected/` with one warning each while the good ones are
delivered; a run whose gateway is down ends with one warning saying what it spooled and the exact
command that delivers it; /metrics that cannot bind is one clear error before any run folder exists.
Outcomes that are not a plain exit 2 live here; the exit-2 ones are in tests/bad_input/test_telemetry.py.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, delete_from_gateway, push_to_gateway

from conftest import gateway_groups, run_cli
from fleetbench.config.schema import TelemetryConfig
from fleetbench.errors import UserError
from fleetbench.services.stack import LocalStack, free_port
from fleetbench.telemetry import session
from fleetbench.telemetry.recorder import RunIdentity
from fleetbench.telemetry.session import BenchmarkRun
from fleetbench.telemetry.spool import Spool, read_entry

REJECTED_LINE = re.compile(r"^warning: rejected (?P<path>\S+): (?P<reason>.+); moved to (?P<target>\S+)$")


@pytest.fixture(autouse=True)
def _no_exit_notice() -> Iterator[None]:
    """The runs here spool in process; their notice is tested through the CLI, not printed at exit."""
    yield
    session._SPOOLED.clear()


def spooled_run(results: Path, run_id: str) -> Path:
    """A real run whose Pushgateway is a closed loopback port: its final state goes to the spool."""
    identity = RunIdentity("loop", run_id, "test-host", "cpu-model", "cpu", 0)
    telemetry = TelemetryConfig(pushgateway=f"http://127.0.0.1:{free_port()}", push_timeout_s=0.3, push_retries=0)
    with BenchmarkRun(identity, results, telemetry, config={}) as run:
        run.metrics.inc("fleetbench_steps_total", 3)
        run.step_done()
    assert run.push_outcome is not None and run.push_outcome.spooled
    return results / ".spool"


def bad_entries(good: bytes) -> dict[str, bytes]:
    """Entry files that parse (mostly) but are wrong, each made from a good one."""
    entry = json.loads(good)

    def variant(**changes: object) -> bytes:
        return json.dumps({**entry, **changes}).encode()

    return {
        "garbage-exposition.json": variant(exposition="garbage {{{ not metrics\n"),
        "list-grouping-key.json": variant(grouping_key=["benchmark", "loop"]),
        "int-label-value.json": variant(grouping_key={**entry["grouping_key"], "rank": 0}),
        "empty-job.json": variant(job=""),
        "missing-fields.json": json.dumps({"gateway": entry["gateway"], "job": "fleetbench"}).encode(),
        "wrong-time-type.json": variant(spooled_at="yesterday"),
        "conflicting-label.json": variant(grouping_key={**entry["grouping_key"], "rank": "7"}),
        "not-json.json": b"{not json",
        "empty.json": b"",
        "not-utf8.json": b"\xff\xfe\x00garbage",
    }


def rejected_lines(stderr: str) -> dict[str, str]:
    """name -> reason of every `rejected` warning line."""
    found = {}
    for line in stderr.splitlines():
        if match := REJECTED_LINE.match(line):
            found[Path(match["path"]).name] = match["reason"]
    return found


@pytest.mark.services
def test_flush_delivers_the_good_entries_and_sets_the_bad_ones_aside(tmp_path: Path, stack: LocalStack) -> None:
    spool_dir = spooled_run(tmp_path / "results", "faults-good-1")
    (good_path,) = spool_dir.glob("*.json")
    bad = bad_entries(good_path.read_bytes())
    for name, data in bad.items():
        (spool_dir / name).write_bytes(data)

    result = run_cli("metrics", "flush", "--spool-dir", str(spool_dir), "--pushgateway", stack.pushgateway_url)

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    reasons = rejected_lines(result.stderr)
    assert set(reasons) == set(bad), result.stderr
    assert "exposition: not Prometheus text format" in reasons["garbage-exposition.json"]
    assert reasons["list-grouping-key.json"].startswith("grouping_key: Input should be a valid dictionary")
    assert reasons["int-label-value.json"].startswith("grouping_key.rank: Input should be a valid string")
    assert reasons["empty-job.json"].startswith("job: String should have at least 1 character")
    assert reasons["missing-fields.json"].startswith("grouping_key: missing field (+3 more)")
    assert reasons["wrong-time-type.json"].startswith("spooled_at: Input should be a valid number")
    assert "has rank='0' but the entry's group has '7'" in reasons["conflicting-label.json"]
    assert reasons["not-json.json"].startswith("not JSON")
    assert reasons["empty.json"] == "empty file"
    assert reasons["not-utf8.json"] == "not UTF-8 text (byte 0)"
    assert f"delivered 1, still spooled 0, rejected {len(bad)} (moved to {spool_dir / 'rejected'})" in result.stderr
    # Moved, byte for byte, never deleted; the delivered entry is gone; the group is in the gateway.
    assert {p.name: p.read_bytes() for p in (spool_dir / "rejected").iterdir()} == bad
    assert list(spool_dir.glob("*.json")) == []
    assert any(
        group.get("run_id") == "faults-good-1" and group.get("job") == "fleetbench"
        for group in gateway_groups(stack.pushgateway_url)
    )


def test_a_flush_of_only_bad_entries_exits_1_and_says_so(tmp_path: Path) -> None:
    spool_dir = spooled_run(tmp_path / "results", "faults-bad-1")
    (good_path,) = spool_dir.glob("*.json")
    bad = bad_entries(good_path.read_bytes())
    good_path.unlink()
    for name, data in bad.items():
        (spool_dir / name).write_bytes(data)
    result = run_cli("metrics", "flush", "--results-dir", str(tmp_path / "results"), "--timeout", "0.5")
    assert result.returncode == 1, result.stderr
    assert set(rejected_lines(result.stderr)) == set(bad)
    assert f"delivered 0, still spooled 0, rejected {len(bad)}" in result.stderr
    assert sorted(p.name for p in (spool_dir / "rejected").iterdir()) == sorted(bad)


def test_a_second_rejection_of_the_same_name_keeps_the_first(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    for round_ in (b"first", b"second"):
        (spool_dir / "same.json").write_bytes(round_)
        result = run_cli("metrics", "flush", "--spool-dir", str(spool_dir))
        assert result.returncode == 1, result.stderr
    assert (spool_dir / "rejected" / "same.json").read_bytes() == b"first"
    assert (spool_dir / "rejected" / "same.json.1").read_bytes() == b"second"


def test_flush_leaves_files_being_written_and_other_files_alone(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    (spool_dir / "rejected").mkdir(parents=True)
    kept = {".tmp-abc123.json": b'{"half": ', "notes.txt": b"mine", "rejected/old.json": b"{"}
    for name, data in kept.items():
        (spool_dir / name).write_bytes(data)
    result = run_cli("metrics", "flush", "--spool-dir", str(spool_dir))
    assert result.returncode == 0, result.stderr
    assert "delivered 0, still spooled 0" in result.stderr
    assert "rejected" not in result.stderr
    assert {str(p.relative_to(spool_dir)): p.read_bytes() for p in spool_dir.rglob("*") if p.is_file()} == kept


def test_the_spool_of_a_bad_entry_is_still_readable_by_the_library(tmp_path: Path) -> None:
    """Spool.entries() (what flush pushes) leaves bad files out instead of raising."""
    spool_dir = spooled_run(tmp_path / "results", "faults-lib-1")
    (spool_dir / "zz-bad.json").write_bytes(b"[]")
    good, bad = Spool(spool_dir).scan()
    assert [entry.grouping_key["run_id"] for _path, entry in good] == ["faults-lib-1"]
    assert [(r.path.name, r.reason) for r in bad] == [
        ("zz-bad.json", "expected a JSON object with fields gateway, job, grouping_key, exposition, spooled_at, reason")
    ]
    assert len(Spool(spool_dir).entries()) == 1


@pytest.mark.services
def test_the_pushgateway_would_relabel_what_the_conflict_check_rejects(stack: LocalStack) -> None:
    """A real Pushgateway overwrites a sample label that contradicts the grouping key, without a word:
    delivering such an entry would put its series under another rank, so the flush rejects it first."""
    registry = CollectorRegistry()
    gauge = Gauge("faults_conflict", "a sample whose rank differs from its group's", ["rank"], registry=registry)
    gauge.labels(rank="0").set(1)
    push_to_gateway(stack.pushgateway_url, job="faults-conflict", registry=registry, grouping_key={"rank": "7"})
    try:
        body = urllib.request.urlopen(f"{stack.pushgateway_url}/metrics", timeout=5).read().decode()
    finally:  # the session's gateway is shared: leave no foreign group in it
        delete_from_gateway(stack.pushgateway_url, job="faults-conflict", grouping_key={"rank": "7"})
    (line,) = [line for line in body.splitlines() if line.startswith("faults_conflict{")]
    assert 'rank="7"' in line and 'rank="0"' not in line


@pytest.mark.services
def test_a_run_with_the_gateway_down_says_what_it_spooled_and_the_command_delivers_it(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there: every push is refused
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    run = run_cli(
        "probe",
        "--pushgateway",
        url,
        "--run-id",
        "down-1",
        *("--set", "probe.matmul_sizes=[64]", "--set", "probe.copy_mib=[]", "--set", "probe.min_run_time_s=0.01"),
        *("--set", "telemetry.push_timeout_s=0.3", "--set", "telemetry.push_retries=0"),
        cwd=tmp_path,
    )
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, run.stderr
    notice = warnings[0]
    assert run.stderr.rstrip().endswith(notice), "the notice is the last thing the run prints"
    assert f"the Pushgateway {url} did not take 1 metric group (URLError: [Errno 111] Connection refused)" in notice
    assert "spooled in results/.spool" in notice
    command = re.search(r"deliver with `([^`]+)`", notice)
    assert command is not None, notice
    assert command[1] == f"fleetbench metrics flush --spool-dir results/.spool --pushgateway {url}"
    assert "(or `make flush`)" in notice
    assert len(Spool(tmp_path / "results" / ".spool").entries()) == 1

    # The gateway comes back on the same port; the printed command, as printed, delivers the group.
    gateway = subprocess.Popen(
        ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(url)
        words = shlex.split(command[1])
        assert words[0] == "fleetbench"
        flushed = subprocess.run(
            [sys.executable, "-m", "fleetbench", *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert flushed.returncode == 0, flushed.stderr
        assert "delivered 1, still spooled 0" in flushed.stderr
        assert any(group.get("run_id") == "down-1" for group in gateway_groups(url))
    finally:
        gateway.kill()
        gateway.wait()
    assert elapsed < 60, elapsed


def wait_ready(url: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{url}/-/ready", timeout=1)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_metrics_port_in_use_is_one_error_and_no_run_folder(tmp_path: Path) -> None:
    identity = RunIdentity("loop", "busy-1", "test-host", "cpu-model", "cpu", 0)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        run = BenchmarkRun(identity, tmp_path / "results", TelemetryConfig(http_port=port), config={})
        with pytest.raises(UserError, match=rf"telemetry.http_port: 127.0.0.1:{port} is already in use; .* or 0 for"):
            run.__enter__()
    assert not (tmp_path / "results").exists()


def test_metrics_on_any_free_port_and_the_port_freed_for_the_next_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fleetbench")
    identity = RunIdentity("loop", "port0-1", "test-host", "cpu-model", "cpu", 0)
    with BenchmarkRun(identity, tmp_path / "results", TelemetryConfig(http_port=0), config={}) as run:
        server, _thread = run._http
        port = server.server_address[1]
        run.metrics.inc("fleetbench_steps_total", 2)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "fleetbench_steps_total{" in body
    assert f"metrics served on http://127.0.0.1:{port}/metrics" in caplog.text
    # The same fixed port, twice in one process (the demo's stages): the first run let go of it.
    for run_id in ("fixed-1", "fixed-2"):
        again = RunIdentity("loop", run_id, "test-host", "cpu-model", "cpu", 0)
        with BenchmarkRun(again, tmp_path / "results", TelemetryConfig(http_port=port), config={}):
            pass


def test_a_spool_that_cannot_be_written_does_not_fail_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    identity = RunIdentity("loop", "nospool-1", "test-host", "cpu-model", "cpu", 0)
    blocked = tmp_path / "spool"
    telemetry = TelemetryConfig(
        pushgateway=f"http://127.0.0.1:{free_port()}", push_timeout_s=0.3, push_retries=0, spool_dir=blocked
    )
    with BenchmarkRun(identity, tmp_path / "results", telemetry, config={}) as run:
        blocked.write_text("a file where the spool should go")  # after the start-up check
    assert run.record is not None and run.record.status == "ok"
    assert run.push_outcome is not None and not run.push_outcome.spooled
    assert "could not spool to" in caplog.text and ".prom file holds its metrics" in caplog.text
    assert (tmp_path / "results" / "nospool-1" / "fleetbench_loop_rank0.prom").is_file()
    assert session.spooled_notices() == []


def test_a_spooled_entry_reads_back_as_written(tmp_path: Path) -> None:
    spool_dir = spooled_run(tmp_path / "results", "faults-read-1")
    (path,) = spool_dir.glob("*.json")
    entry = read_entry(path)
    assert entry.grouping_key == {"benchmark": "loop", "run_id": "faults-read-1", "instance": "test-host", "rank": "0"}
    assert 'fleetbench_steps_total{backend="cpu"' in entry.exposition
