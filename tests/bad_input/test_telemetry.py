"""Bad telemetry input: flush arguments and spool folders, the /metrics exporter, the telemetry section,
and the Pushgateway from the environment.

Each case runs the real entry point in a subprocess through tests/badinput.py:check: one
`fleetbench: error: ...` line naming the problem, exit 2, no traceback, nothing written (a spool with
a bad entry stays as it was). Flushes whose outcome is not an error (good entries delivered, bad ones
moved aside, exit 1) are in tests/test_spool_faults.py.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from badinput import BadInput, check
from fleetbench.services.stack import free_port

# A run's tiny settings: should a case be accepted by mistake, the run it starts is short.
TINY = ("--set", "probe.matmul_sizes=[64]", "--set", "probe.copy_mib=[]", "--set", "probe.min_run_time_s=0.01")
BUSY_PORT = free_port()  # a socket listens here while the case runs (see hold_port)
_HELD: list[socket.socket] = []  # module-level, so the socket stays open while the subprocess runs


def hold_port(_tmp: Path) -> None:
    """Listen on BUSY_PORT of 127.0.0.1 until the test closes it: the run's /metrics cannot bind there."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", BUSY_PORT))
    held.listen()
    _HELD.append(held)


def setting(value: str, fragment: str, case_id: str, **more: object) -> BadInput:
    """A `fleetbench probe --set telemetry.VALUE` case (plus the tiny probe settings)."""
    return BadInput(case_id, ("probe", "--set", f"telemetry.{value}", *TINY), fragment, **more)  # type: ignore[arg-type]


def env_gateway(value: str, fragment: str, case_id: str) -> BadInput:
    """A `fleetbench probe` case with FLEETBENCH_PUSHGATEWAY=VALUE."""
    return BadInput(case_id, ("probe", *TINY), fragment, env={"FLEETBENCH_PUSHGATEWAY": value})


GOOD_LOOKING = '{"gateway": "http://127.0.0.1:9091", "job": "", "grouping_key": [], "exposition": "x", '
FLUSH_CASES = [
    BadInput(
        "telemetry-flush-spool-dir-missing",
        ("metrics", "flush", "--spool-dir", "{tmp}/no-spool"),
        "no-spool does not exist",
    ),
    BadInput(
        "telemetry-flush-spool-dir-a-file",
        ("metrics", "flush", "--spool-dir", "{tmp}/spool"),
        "spool dir",
        files={"spool": "a file, not a folder"},
    ),
    BadInput(
        "telemetry-flush-results-dir-missing",
        ("metrics", "flush", "--results-dir", "{tmp}/no-results"),
        "no-results does not exist; pass the folder the runs wrote to",
    ),
    BadInput(
        "telemetry-flush-results-dir-a-file",
        ("metrics", "flush", "--results-dir", "{tmp}/results"),
        "results is not a folder",
        files={"results": "a file"},
    ),
    BadInput(
        "telemetry-flush-default-spool-a-file",
        ("metrics", "flush", "--results-dir", "{tmp}/results"),
        ".spool is not a folder; move it away",
        files={"results/.spool": "a file where the spool goes"},
    ),
    BadInput(
        "telemetry-flush-cwd-spool-a-file",
        ("metrics", "flush"),
        "spool dir results/.spool is not a folder",
        files={"results/.spool": "a file in the default results folder"},
    ),
    BadInput(
        "telemetry-flush-rejected-a-file",
        ("metrics", "flush", "--spool-dir", "{tmp}/spool"),
        "cannot move bad spool entries aside: ",
        files={"spool/0123abcd.json": GOOD_LOOKING, "spool/rejected": "a file where rejected/ goes"},
    ),
    BadInput(
        "telemetry-flush-spool-dir-empty",
        ("metrics", "flush", "--spool-dir", ""),
        "--spool-dir: an empty path is not a folder",
        files={"a.json": "{}"},  # the current folder is not taken for the spool (this would be moved aside)
    ),
    BadInput("telemetry-flush-results-dir-empty", ("metrics", "flush", "--results-dir", ""), "--results-dir: an empty"),
    BadInput(
        "telemetry-flush-url-empty", ("metrics", "flush", "--pushgateway", ""), "--pushgateway '' is not accepted"
    ),
    BadInput(
        "telemetry-flush-url-ftp",
        ("metrics", "flush", "--pushgateway", "ftp://127.0.0.1:9091"),
        "--pushgateway 'ftp://127.0.0.1:9091' is not accepted",
    ),
    BadInput(
        "telemetry-flush-url-port-0",
        ("metrics", "flush", "--pushgateway", "http://127.0.0.1:0"),
        "'http://127.0.0.1:0' is not accepted: has port 0",
    ),
    BadInput(
        "telemetry-flush-url-port-too-big",
        ("metrics", "flush", "--pushgateway", "http://127.0.0.1:70000"),
        "'http://127.0.0.1:70000' is not accepted: has an invalid port",
    ),
    BadInput(
        "telemetry-flush-url-query",
        ("metrics", "flush", "--pushgateway", "http://127.0.0.1:9091/?job=x"),
        "must not carry a query or fragment",
    ),
    BadInput(
        "telemetry-flush-url-userinfo",
        ("metrics", "flush", "--pushgateway", "http://u:p@127.0.0.1:9091"),
        "carries user:password@",
    ),
    BadInput("telemetry-flush-timeout-zero", ("metrics", "flush", "--timeout", "0"), "--timeout 0.0 is not accepted"),
    BadInput("telemetry-flush-timeout-nan", ("metrics", "flush", "--timeout", "nan"), "--timeout nan is not accepted"),
    BadInput("telemetry-flush-timeout-huge", ("metrics", "flush", "--timeout", "1000"), "use seconds in (0, 120]"),
]

HTTP_CASES = [
    BadInput(
        "telemetry-http-port-in-use",
        ("probe", "--set", f"telemetry.http_port={BUSY_PORT}", *TINY),
        f"telemetry.http_port: 127.0.0.1:{BUSY_PORT} is already in use; set another port with "
        "--set telemetry.http_port=PORT, or 0 for any free port",
        prepare=hold_port,
    ),
    BadInput(
        "telemetry-http-addr-not-here",
        ("probe", "--set", "telemetry.http_addr=192.0.2.1", "--set", "telemetry.http_port=0", *TINY),
        "telemetry.http_addr: cannot listen on '192.0.2.1' (Cannot assign requested address); use an address of",
    ),
    setting(
        "http_addr=999.1.1.1", "telemetry.http_addr: Value error, is not a valid IPv4 address", "telemetry-addr-ipv4"
    ),
    setting(
        "http_addr=127.0.0.1:9100", "nor a host without a port (the port is telemetry.http_port)", "telemetry-addr-port"
    ),
    setting("http_addr=http://127.0.0.1", "without brackets, scheme or path", "telemetry-addr-scheme"),
    BadInput(
        "telemetry-addr-brackets",
        ("probe", "--config", "{tmp}/c.toml", *TINY),
        "c.toml: telemetry.http_addr: Value error, must be a bare address, without brackets",
        files={"c.toml": '[telemetry]\nhttp_addr = "[::1]"\n'},
    ),
    setting("http_addr=", "telemetry.http_addr: Value error, is empty", "telemetry-addr-empty"),
    setting("http_addr=bad_host", "is not a host name (dot-separated labels", "telemetry-addr-underscore"),
    setting(
        "http_addr=-leading.example", "telemetry.http_addr: Value error, is not a host name", "telemetry-addr-hyphen"
    ),
    setting(
        "http_addr=local host", "telemetry.http_addr: Value error, must not contain spaces", "telemetry-addr-space"
    ),
    setting("http_addr=fe80::zz", "is not a valid IPv6 address", "telemetry-addr-ipv6"),
    setting("http_addr=10", "telemetry.http_addr: Input should be a valid string", "telemetry-addr-number"),
    BadInput(
        "telemetry-addr-in-file",
        ("probe", "--config", "{tmp}/c.yaml", *TINY),
        "c.yaml: telemetry.http_addr: Value error, is not a valid IPv4 address",
        files={"c.yaml": "telemetry:\n  http_addr: 1.2.3\n  http_port: 9100\n"},
    ),
]

SETTING_CASES = [
    setting(
        "http_port=-1", "telemetry.http_port: Input should be greater than or equal to 0", "telemetry-port-negative"
    ),
    setting(
        "http_port=65536", "telemetry.http_port: Input should be less than or equal to 65535", "telemetry-port-big"
    ),
    setting("http_port=true", "telemetry.http_port: Input should be", "telemetry-port-bool"),
    setting("http_port=abc", "telemetry.http_port: Input should be a valid integer", "telemetry-port-text"),
    setting("http_port=1.5", "telemetry.http_port: Input should be a valid integer", "telemetry-port-fraction"),
    setting("push_timeout_s=0", "telemetry.push_timeout_s: Input should be greater than 0", "telemetry-timeout-zero"),
    setting(
        "push_timeout_s=61",
        "telemetry.push_timeout_s: Input should be less than or equal to 60",
        "telemetry-timeout-big",
    ),
    setting("push_timeout_s=.nan", "telemetry.push_timeout_s: Input should be", "telemetry-timeout-nan"),
    setting(
        "push_retries=-1", "telemetry.push_retries: Input should be greater than or equal to 0", "telemetry-retries-neg"
    ),
    setting(
        "push_retries=100", "telemetry.push_retries: Input should be less than or equal to 10", "telemetry-retries-big"
    ),
    setting(
        "push_backoff_s=-0.1",
        "telemetry.push_backoff_s: Input should be greater than or equal to 0",
        "telemetry-backoff-neg",
    ),
    setting(
        "push_backoff_s=11",
        "telemetry.push_backoff_s: Input should be less than or equal to 10",
        "telemetry-backoff-big",
    ),
    setting(
        "push_interval_s=-1",
        "telemetry.push_interval_s: Input should be greater than or equal to 0",
        "telemetry-interval-neg",
    ),
    setting(
        "push_interval_s=3601",
        "telemetry.push_interval_s: Input should be less than or equal to 3600",
        "telemetry-interval-big",
    ),
    setting("spool_dir=", "telemetry.spool_dir: Value error, must name a folder", "telemetry-spool-empty"),
    setting("textfile_dir=", "telemetry.textfile_dir: Value error, must name a folder", "telemetry-textfile-empty"),
    setting(
        "http_prot=9100", "telemetry.http_prot: unknown key; accepted: http_addr, http_port", "telemetry-unknown-key"
    ),
    setting(
        "pushgateway=127.0.0.1:9091", "telemetry.pushgateway: Value error, is not an http(s) URL", "telemetry-set-url"
    ),
    BadInput(
        "telemetry-spool-dir-a-file",
        ("probe", "--pushgateway", "http://127.0.0.1:9", "--set", "telemetry.spool_dir={tmp}/spool", *TINY),
        "telemetry.spool_dir",
        files={"spool": "a file where the spool goes"},
    ),
    BadInput(
        "telemetry-spool-dir-under-a-file",
        ("probe", "--pushgateway", "http://127.0.0.1:9", "--set", "telemetry.spool_dir={tmp}/blocker/spool", *TINY),
        "blocker is not a folder; pass another folder",
        files={"blocker": "a file"},
    ),
    BadInput(
        "telemetry-textfile-dir-under-a-file",
        ("probe", "--set", "telemetry.textfile_dir={tmp}/blocker/textfile", *TINY),
        "textfile dir",
        files={"blocker": "a file"},
    ),
]

E = "FLEETBENCH_PUSHGATEWAY: telemetry.pushgateway: Value error, "
ENV_CASES = [
    env_gateway("127.0.0.1:9091", E + "is not an http(s) URL", "telemetry-env-no-scheme"),
    env_gateway("ftp://127.0.0.1:9091", E + "is not an http(s) URL", "telemetry-env-ftp"),
    env_gateway("http://127.0.0.1:99999", E + "has an invalid port", "telemetry-env-bad-port"),
    env_gateway("http://", E + "is not an http(s) URL", "telemetry-env-no-host"),
    env_gateway(" http://127.0.0.1:9091", E + "must not carry ", "telemetry-env-space"),
    env_gateway("http://127.0.0.1:9091/#x", E + "must not carry ", "telemetry-env-fragment"),
]

CASES: list[BadInput] = [*FLUSH_CASES, *HTTP_CASES, *SETTING_CASES, *ENV_CASES]


@pytest.fixture
def _release_ports() -> Iterator[None]:
    yield
    while _HELD:
        _HELD.pop().close()


@pytest.mark.usefixtures("_release_ports")
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_telemetry_input_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    check(case, tmp_path / "work", tmp_path / "home")
