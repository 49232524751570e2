"""Bad input to the jobs: profile, edge, report and dashboards, train and probe.

Each case runs the real entry point in a subprocess through tests/badinput.py:check: one
`fleetbench: error: ...` line naming the problem, exit 2 (or the status a profiled program asked
for), no traceback, nothing written. Every case fails at validation, before a capture, a kernel, a
program load or a rank starts. A profiled program that fails shows its own traceback at the info
level, so those cases pass `--log-level warning` to see the one line alone. Paths are given
relative to the case's folder (the command's working directory), so the error names them as given.

Permissions do not stop root: each chmod-based case (`NEEDS_PERMISSIONS`) is skipped where they do
not bind (root, tried for real by `permissions_bind`), and a case beside it makes the same input unusable another way (a FIFO, a file where a
folder belongs, bytes that are not UTF-8) that holds for root too.
"""

from __future__ import annotations

import functools
import os
import random
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from badinput import BadInput, check, record_line

RECORD = record_line("r1")
RUN: dict[str, str | bytes] = {"results/r1/records.jsonl": RECORD}  # a run folder `report` accepts
QUIET = ("--log-level", "warning")  # leaves out the info lines (and a profiled program's traceback)
NOT_CAPTURED = "the profile capture did not happen and no run was recorded"
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}  # an imported user module would leave __pycache__ behind
NOT_A_PROGRAM = "not a loadable ExecuTorch program"
# Every train case fails before its first step; one rank and one step keep a case that did not cheap.
TRAIN = ("train", "--device", "cpu", "--nproc", "1", "--steps", "1")


def _random_bytes(count: int, seed: int) -> bytes:
    generator = random.Random(seed)
    return bytes(generator.randrange(256) for _ in range(count))


def _pte_header(program_size: int, segment_base: int, segment_size: int) -> bytes:
    """The first bytes exir writes: root offset, identifier, extended header ('eh00', length 32, sizes)."""
    header = (
        b"eh00"
        + (32).to_bytes(4, "little")
        + program_size.to_bytes(8, "little")
        + segment_base.to_bytes(8, "little")
        + segment_size.to_bytes(8, "little")
    )
    return (48).to_bytes(4, "little") + b"ET12" + header + bytes(8)


# A program cut short: its header promises 3.4 MB (program, then delegate segments), 4 KiB are left.
TRUNCATED_PTE = _pte_header(34704, 34816, 3449984) + _random_bytes(4096 - 48, 7)
# Bytes 4-8 are not valid UTF-8: ExecuTorch's runtime aborts the process when it logs them.
RANDOM_PTE = b"\x00\x01\x02\x03\xd3\x85\xff\xfe" + _random_bytes(4088, 1)


def _fifo(name: str) -> Callable[[Path], None]:
    """A prepare step: `name` (under the case's folder) is a FIFO, which blocks whoever opens it to read."""

    def make(tmp: Path) -> None:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)

    return make


def _chmod(name: str, mode: int) -> Callable[[Path], None]:
    """A prepare step: `name` (under the case's folder) gets `mode`; root ignores it (see NEEDS_PERMISSIONS)."""

    def make(tmp: Path) -> None:
        (tmp / name).chmod(mode)

    return make


def _damaged_checkpoint(tmp: Path) -> None:
    """ck/step_00000002: a real DCP checkpoint whose shard was cut in half after it was written."""
    import warnings

    import torch
    from torch.distributed.checkpoint import state_dict_saver

    folder = tmp / "ck" / "step_00000002"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        state_dict_saver.save({"model": {"w": torch.arange(4096, dtype=torch.float32)}}, checkpoint_id=str(folder))
    shard = next(folder.glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


PROFILE_CASES = [
    BadInput("job-profile-script-missing", ("profile", "--script", "none.py"), "profile.script", files={}),
    BadInput(
        "job-profile-script-is-a-folder",
        ("profile", "--script", "work.py"),
        "profile.script work.py is a folder, not a file",
        files={"work.py/x": ""},
    ),
    BadInput(
        "job-profile-script-syntax-error",
        ("profile", "--script", "s.py"),
        "profile.script s.py: SyntaxError:",
        files={"s.py": "def main(:\n    pass\n"},
    ),
    BadInput(
        "job-profile-script-indentation-error",
        ("profile", "--script", "s.py"),
        "IndentationError: expected an indented block after function definition on line 1 at line 2",
        files={"s.py": "def main():\nreturn 1\n"},
    ),
    BadInput(
        "job-profile-script-not-text",
        ("profile", "--script", "s.py"),
        "profile.script s.py:",
        files={"s.py": b"\xff\xfe\x00\x01 binary"},
    ),
    BadInput(
        "job-profile-script-fifo",
        ("profile", "--script", "s.py"),
        "is not a regular file",
        prepare=_fifo("s.py"),
    ),
    BadInput(
        "job-profile-script-unreadable",
        ("profile", "--script", "s.py"),
        "profile.script s.py cannot be read (Permission denied)",
        files={"s.py": "print('hi')\n"},
        prepare=_chmod("s.py", 0),
    ),
    BadInput(
        "job-profile-script-raises",
        (*QUIET, "profile", "--script", "s.py"),
        f"script s.py failed: ValueError: no data at s.py:2 in load; {NOT_CAPTURED}",
        files={"s.py": "def load():\n    raise ValueError('no data')\n\nload()\n"},
    ),
    BadInput(
        "job-profile-script-system-exit-message",
        (*QUIET, "profile", "--script", "s.py"),
        f"exited with 'stopped early' (status 1); {NOT_CAPTURED}",
        files={"s.py": "raise SystemExit('stopped early')\n"},
        code=1,
    ),
    BadInput(
        "job-profile-script-system-exit-status",
        (*QUIET, "profile", "--script", "s.py", "--", "--fail"),
        f"exited with status 3; {NOT_CAPTURED}",
        files={"s.py": "import sys\nsys.exit(3 if '--fail' in sys.argv else 0)\n"},
        code=3,
    ),
    BadInput(
        "job-profile-module-missing",
        ("profile", "--module", "no_such_module_for_fleetbench"),
        "profile.module 'no_such_module_for_fleetbench' not found on the Python path",
    ),
    BadInput(
        "job-profile-module-package-without-main",
        ("profile", "--module", "tools"),
        "profile.module 'tools' is a package without a __main__ module",
        files={"tools/__init__.py": ""},
        env=NO_BYTECODE,
        own_process=True,  # imports the user's module: sys.path and sys.modules are the process's
    ),
    BadInput(
        "job-profile-module-raises",
        (*QUIET, "profile", "--module", "broken"),
        "module broken failed: RuntimeError: not configured at /",
        files={"broken.py": "raise RuntimeError('not configured')\n"},
        env=NO_BYTECODE,
        own_process=True,  # imports the user's module: sys.path and sys.modules are the process's
    ),
    BadInput(
        "job-profile-module-parent-raises",
        (*QUIET, "profile", "--module", "pkg.job"),
        "profile.module 'pkg.job': importing its package failed: ImportError: missing",
        files={"pkg/__init__.py": "raise ImportError('missing')\n", "pkg/job.py": ""},
        env=NO_BYTECODE,
        own_process=True,  # imports the user's module: sys.path and sys.modules are the process's
    ),
    BadInput("job-profile-module-bad-name", ("profile", "--module", "1st.module"), "profile.module: String should"),
    BadInput(
        "job-profile-workload-unknown",
        ("profile", "--workload", "conv"),
        "Input should be 'auto', 'train', 'linear', 'script' or 'module'",
    ),
    BadInput(
        "job-profile-script-and-module",
        ("profile", "--script", "s.py", "--module", "json.tool"),
        "give profile.script or profile.module, not both",
        files={"s.py": ""},
    ),
    BadInput(
        "job-profile-workload-module-without-module",
        ("profile", "--workload", "module"),
        "workload 'module' needs profile.module=NAME",
    ),
    BadInput(
        "job-profile-active-zero",
        ("profile", "--set", "profile.active=0"),
        "profile.active: Input should be greater than or equal to 1",
    ),
    BadInput(
        "job-profile-thresholds-crossed",
        ("profile", "--set", "profile.thresholds.latency_bound_below=0.9"),
        "latency_bound_below must not exceed high_throughput_at",
    ),
    BadInput(
        "job-profile-thresholds-replaced",
        ("profile", "--set", "profile.thresholds.memory_bound_compute_below=0.2"),
        "memory_bound_compute_below: replaced when the classes took NVIDIA's SOLBottleneck rule",
    ),
    BadInput(
        "job-profile-float16-linear-on-cpu",
        ("profile", "--workload", "linear", "--device", "cpu", "--set", "profile.dtype=float16"),
        "profile.dtype=float16 is not accepted on CPU",
    ),
    BadInput(
        "job-profile-results-dir-under-a-file",
        ("profile", "--workload", "linear", "--device", "cpu", "--results-dir", "r/results"),
        "results dir r/results is not writable (r is a file, not a folder)",
        files={"r": "a file"},
    ),
]

EDGE_CASES = [
    BadInput(
        "job-edge-pte-random-bytes",
        ("edge", "run", "--pte", "m.pte"),
        f"{NOT_A_PROGRAM} (Program identifier '\\xd3\\x85\\xff\\xfe' != expected 'ET12')",
        files={"m.pte": RANDOM_PTE},
    ),
    BadInput(
        "job-edge-pte-empty",
        ("edge", "run", "--pte", "m.pte"),
        f"{NOT_A_PROGRAM} (the file is empty)",
        files={"m.pte": b""},
    ),
    BadInput(
        "job-edge-pte-truncated",
        ("edge", "run", "--pte", "m.pte"),
        "File size is too small: the extended header says 3484800 bytes, the file has 4096",
        files={"m.pte": TRUNCATED_PTE},
    ),
    BadInput(
        "job-edge-pte-shorter-than-a-header",
        ("edge", "run", "--pte", "m.pte"),
        "5 bytes, shorter than a FlatBuffer header",
        files={"m.pte": b"ET12\n"},
    ),
    BadInput(
        "job-edge-pte-data-file",
        ("edge", "run", "--pte", "m.ptd"),
        "a FlatTensor data file (.ptd), not a program",
        files={"m.ptd": (16).to_bytes(4, "little") + b"FT01" + bytes(56)},
    ),
    BadInput(
        "job-edge-pte-root-outside",
        ("edge", "run", "--pte", "m.pte"),
        "root table offset 4294967295 lies outside the file's 64 bytes",
        files={"m.pte": b"\xff\xff\xff\xffET12" + bytes(56)},
    ),
    BadInput(
        "job-edge-thermal-root-missing",
        ("edge", "run", "--set", "edge.thermal_root=nowhere"),
        "edge.thermal_root=nowhere: not a folder; accepted: a folder holding sys/class/thermal",
    ),
    BadInput("job-edge-pte-missing", ("edge", "run", "--pte", "none.pte"), ".pte file none.pte not found"),
    BadInput(
        "job-edge-pte-folder",
        ("edge", "run", "--pte", "m.pte"),
        ".pte file m.pte is a folder, not a file",
        files={"m.pte/x": ""},
    ),
    BadInput("job-edge-pte-fifo", ("edge", "run", "--pte", "m.pte"), "is not a regular file", prepare=_fifo("m.pte")),
    BadInput(
        "job-edge-pte-unreadable",
        ("edge", "run", "--pte", "locked.pte"),
        ".pte file locked.pte cannot be read (Permission denied)",
        files={"locked.pte": TRUNCATED_PTE},
        prepare=_chmod("locked.pte", 0),
    ),
    BadInput("job-edge-kernel-unknown", ("edge", "run", "--kernels", "gemm_fast"), "edge.kernels.0: Input should be"),
    BadInput("job-edge-kernels-empty", ("edge", "run", "--kernels", " , "), "--kernels ' , ' is empty"),
    BadInput("job-edge-kernels-repeated", ("edge", "run", "--kernels", "copy,copy"), "values must be unique"),
    BadInput("job-edge-dtype-unknown", ("edge", "run", "--dtypes", "float64"), "edge.dtypes.0: Input should be"),
    BadInput("job-edge-timing-unknown", ("edge", "run", "--timing", "fast"), "Input should be 'auto', 'timestamp'"),
    BadInput(
        "job-edge-gemm-size-not-128",
        ("edge", "run", "--set", "edge.gemm_sizes=[100]"),
        "edge.gemm_sizes.0: Input should be a multiple of 128",
    ),
    BadInput(
        "job-edge-tries-crossed",
        ("edge", "run", "--set", "edge.min_tries=9", "--set", "edge.max_tries=2"),
        "min_tries=9 exceeds max_tries=2",
    ),
    BadInput(
        "job-edge-peak-iterations-not-power-of-two",
        ("edge", "run", "--set", "edge.peak_iterations=100"),
        "must be a power of two",
    ),
    BadInput("job-edge-cpu-affinity-words", ("edge", "run", "--cpu-affinity", "a,b"), "--cpu-affinity 'a,b'"),
    BadInput(
        "job-edge-cpu-affinity-absent-cpu",
        ("edge", "run", "--kernels", "none", "--cpu-affinity", "65000"),
        "edge.cpu_affinity: CPU 65000 does not exist",
    ),
    BadInput(
        "job-edge-nothing-to-run",
        ("edge", "run", "--kernels", "none", "--set", "edge.mps=false"),
        "nothing to run: edge.kernels is empty",
    ),
    BadInput("job-edge-module-spec", ("edge", "run", "--module", "tiny"), "edge.module: String should match"),
]

REPORT_CASES = [
    BadInput(
        "job-report-run-missing",
        ("report", "r2", "--results-dir", "results", "--offline"),
        "run 'r2' not found under results; recent runs: r1",
        files=RUN,
    ),
    BadInput(
        "job-report-run-folder-read-only",
        ("report", "r1", "--results-dir", "results", "--offline"),
        "report folder results/r1/report/panels is not writable (Permission denied)",
        files=RUN,
        prepare=_chmod("results/r1", 0o555),
    ),
    BadInput(
        "job-report-folder-is-a-file",
        ("report", "r1", "--results-dir", "results", "--offline"),
        "(results/r1/report is a file, not a folder); make the run folder",
        files={**RUN, "results/r1/report": "not a folder"},
    ),
    BadInput(
        "job-report-records-not-utf8",
        ("report", "r1", "--results-dir", "results", "--offline"),
        "results/r1/records.jsonl:1: not a valid result record",
        files={"results/r1/records.jsonl": RECORD.encode()[:-20] + b"\xff\xfe\n"},
    ),
    BadInput(
        "job-report-records-unreadable",
        ("report", "r3", "--results-dir", "results", "--offline"),
        "results/r3/records.jsonl: cannot read (Permission denied)",
        files={"results/r3/records.jsonl": RECORD},
        prepare=_chmod("results/r3/records.jsonl", 0),
    ),
    BadInput(
        "job-report-plot-fifo",
        ("report", "r4", "--results-dir", "results", "--offline"),
        "plot results/r4/loss.png is not a regular file",
        files={"results/r4/records.jsonl": RECORD},
        prepare=_fifo("results/r4/loss.png"),
    ),
    BadInput(
        "job-report-plot-unreadable",
        ("report", "r1", "--results-dir", "results", "--offline"),
        "plot results/r1/train/loss.png cannot be read (Permission denied)",
        files={**RUN, "results/r1/train/loss.png": b"\x89PNG\r\n\x1a\n"},
        prepare=_chmod("results/r1/train/loss.png", 0),
    ),
    BadInput(
        "job-dashboards-out-is-a-file",
        ("dashboards", "--out", "out.json"),
        "dashboards folder out.json is not writable (it is a file, not a folder); pass a writable folder",
        files={"out.json": "{}"},
    ),
    BadInput(
        "job-dashboards-out-under-a-file",
        ("dashboards", "--out", "out.json/grafana"),
        "(out.json is a file, not a folder)",
        files={"out.json": "{}"},
    ),
    BadInput(
        "job-dashboards-out-read-only",
        ("dashboards", "--out", "grafana"),
        "dashboards folder grafana is not writable (Permission denied)",
        files={"grafana/README": "generated"},
        prepare=_chmod("grafana", 0o555),
    ),
    BadInput(
        "job-dashboards-check-out-is-a-file",
        ("dashboards", "--check", "--out", "out.json"),
        "--out out.json is a file, not a folder",
        files={"out.json": "{}"},
    ),
    BadInput(
        "job-dashboards-check-fifo",
        ("dashboards", "--check", "--out", "grafana"),
        "dashboard grafana/fleetbench-overview.json is not a regular file",
        prepare=_fifo("grafana/fleetbench-overview.json"),
    ),
]

TRAIN_CASES = [
    BadInput("job-train-preset-unknown", (*TRAIN, "--preset", "7b"), "train.preset: Input should be 'tiny'"),
    BadInput("job-train-dtype-key", (*TRAIN, "--set", "train.dtype=fp8"), "train.dtype: unknown key; accepted:"),
    BadInput(
        "job-train-mixed-precision-word",
        (*TRAIN, "--set", "train.mixed_precision=0"),
        "train.mixed_precision: Input should be true or false (got 0)",
    ),
    BadInput(
        "job-train-nproc-zero", ("train", "--nproc", "0"), "train.nproc: Input should be greater than or equal to 1"
    ),
    BadInput("job-train-nproc-word", ("train", "--nproc", "two"), "argument --nproc: invalid int value: 'two'"),
    BadInput(
        "job-train-nproc-beyond-cores",
        ("train", "--device", "cpu", "--nproc", "1000"),
        "NPROC=1000 ranks per node but this machine has",
    ),
    BadInput(
        "job-train-nnodes-zero", ("train", "--nnodes", "0"), "train.nnodes: Input should be greater than or equal to 1"
    ),
    BadInput(
        "job-train-max-restarts-negative", (*TRAIN, "--max-restarts", "-1"), "train.max_restarts: Input should be"
    ),
    BadInput(
        "job-train-heads-for-world",
        ("train", "--device", "cpu", "--nproc", "2", "--set", "train.heads=3"),
        "train.heads=3 does not divide train.dim=128",
    ),
    BadInput(
        "job-train-checkpoint-dir-is-a-file",
        (*TRAIN, "--set", "train.checkpoint_dir=ck", "--set", "train.checkpoint_every=1"),
        "checkpoint dir ck is not writable (it is a file, not a folder)",
        files={"ck": "a file"},
    ),
    BadInput(
        "job-train-resume-nothing-saved",
        (*TRAIN, "--resume", "--results-dir", "results"),
        "--resume: no run under results has a complete checkpoint",
        files=RUN,
    ),
    BadInput(
        "job-train-resume-run-without-checkpoint",
        (*TRAIN, "--resume", "--run-id", "r1"),
        "--resume: no complete checkpoint under results/r1/checkpoints",
        files=RUN,
    ),
    BadInput(
        "job-train-resume-only-partial",
        (*TRAIN, "--resume", "--set", "train.checkpoint_dir=ck"),
        "--resume: no complete checkpoint under ck",
        files={"ck/step_00000002.partial/__0_0.distcp": b"\x00" * 64},
    ),
    BadInput(
        "job-train-resume-metadata-garbage",
        (*TRAIN, "--resume", "--set", "train.checkpoint_dir=ck"),
        "checkpoint ck/step_00000002 is damaged: its .metadata does not read",
        files={"ck/step_00000002/.metadata": b"not a pickle", "ck/step_00000002/__0_0.distcp": b""},
    ),
    BadInput(
        "job-train-resume-shard-cut-short",
        (*TRAIN, "--resume", "--set", "train.checkpoint_dir=ck"),
        "checkpoint ck/step_00000002 is damaged: shard __0_0.distcp has",
        prepare=_damaged_checkpoint,
    ),
]

PROBE_CASES = [
    BadInput("job-probe-size-small", ("probe", "--set", "probe.matmul_sizes=[8]"), "greater than or equal to 16"),
    BadInput("job-probe-sizes-repeated", ("probe", "--set", "probe.matmul_sizes=[64,64]"), "values must be unique"),
    BadInput("job-probe-sizes-none", ("probe", "--set", "probe.matmul_sizes=[]"), "List should have at least 1 item"),
    BadInput("job-probe-copy-zero", ("probe", "--set", "probe.copy_mib=[0]"), "probe.copy_mib.0: Input should be"),
    BadInput("job-probe-dtype-int", ("probe", "--set", "probe.dtype=int8"), "probe.dtype: Input should be 'float32'"),
    BadInput("job-probe-threads-negative", ("probe", "--set", "probe.threads=-2"), "probe.threads: Input should be"),
    BadInput("job-probe-threads-huge", ("probe", "--set", "probe.threads=4096"), "less than or equal to 1024"),
    BadInput("job-probe-run-time-zero", ("probe", "--set", "probe.min_run_time_s=0"), "probe.min_run_time_s: Input"),
]

CASES: list[BadInput] = PROFILE_CASES + EDGE_CASES + REPORT_CASES + TRAIN_CASES + PROBE_CASES

# Made unreadable or unwritable by permissions alone, which root ignores; each has a root-proof sibling.
NEEDS_PERMISSIONS = {
    "job-profile-script-unreadable": "job-profile-script-fifo",
    "job-edge-pte-unreadable": "job-edge-pte-fifo",
    "job-report-run-folder-read-only": "job-report-folder-is-a-file",
    "job-report-records-unreadable": "job-report-records-not-utf8",
    "job-report-plot-unreadable": "job-report-plot-fifo",
    "job-dashboards-out-read-only": "job-dashboards-out-under-a-file",
}


def _restore_permissions(root: Path) -> None:
    """Give the owner back what the case took away, so pytest can remove the folder."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            continue
        path.chmod(path.stat().st_mode | stat.S_IRWXU)
        if path.is_dir():
            for child in path.iterdir():  # rglob could not list a folder it had no right to read
                if child.is_dir() and not child.is_symlink():
                    child.chmod(child.stat().st_mode | stat.S_IRWXU)


@functools.cache
def permissions_bind() -> bool:
    """Whether file permissions stop this user: not for root (uid 0 with CAP_DAC_OVERRIDE), tried for real."""
    with tempfile.TemporaryDirectory() as scratch:
        locked = Path(scratch, "locked")
        locked.write_text("x")
        locked.chmod(0)
        try:
            locked.read_text()
        except PermissionError:
            return True
        return False


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_to_a_job_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    if case.id in NEEDS_PERMISSIONS and not permissions_bind():
        who = "root" if os.geteuid() == 0 else "this user"
        pytest.skip(f"{who} reads and writes whatever the permissions say; {NEEDS_PERMISSIONS[case.id]} covers it")
    work = tmp_path / "work"
    try:
        check(case, work, tmp_path / "home")
    finally:
        if work.exists():
            _restore_permissions(work)


def test_every_permission_case_has_a_root_proof_sibling() -> None:
    ids = {case.id for case in CASES}
    assert set(NEEDS_PERMISSIONS) <= ids
    assert set(NEEDS_PERMISSIONS.values()) <= ids


class _Runtime:
    """Stands in for ExecuTorch's Runtime in `_probe_in_child`: its load does what `behaviour` says."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    def load_program(self, path: Path) -> _Runtime:
        if self.behaviour == "abort":
            os.abort()  # what the runtime does when its log line is not UTF-8 (the probe allows no core file)
        if self.behaviour == "raise":
            raise RuntimeError("Verification failed")
        if self.behaviour == "hang":
            import time

            time.sleep(60)
        return self

    def load_method(self, name: str) -> None:
        assert name == "forward"


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="the load is tried in a forked child on Linux only")
def test_a_program_the_runtime_aborts_on_is_one_line_not_a_dead_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetbench.edge import pte
    from fleetbench.errors import UserError

    program = tmp_path / "m.pte"
    program.write_bytes(b"")
    with pytest.raises(UserError, match=r"m\.pte: not a loadable ExecuTorch program \(the ExecuTorch runtime aborts"):
        pte._probe_in_child(program, _Runtime("abort"))
    pte._probe_in_child(program, _Runtime("raise"))  # the real load gives the runtime's own reason
    pte._probe_in_child(program, _Runtime("load"))
    monkeypatch.setattr(pte, "PROBE_TIMEOUT_S", 0.5)
    with pytest.raises(UserError, match=r"did not load it within 0\.5 s"):
        pte._probe_in_child(program, _Runtime("hang"))
