"""Step B: run a program under Nsight Compute (`ncu`) and turn its usual failures into one clear line.

The command is `ncu --set full --target-processes all --clock-control base -f -o REPORT [filters]
PROGRAM...`; kernel filters (--kernel-name, --launch-skip, --launch-count, --nvtx-include) and
extra arguments come from `profile.ncu.*` / the command's flags. Failures recognised in ncu's
output (these are the texts ncu prints):
  - ncu not on PATH                        -> where to get it, how to point at it
  - ERR_NVGPUCTRPERM                       -> counter permission: --cap-add SYS_ADMIN in a container,
                                              NVreg_RestrictProfilingToAdminUsers=0 on the host
  - "No kernels were profiled"             -> the filters matched nothing or the program never used
                                              the GPU
  - no report written / non-zero exit      -> ncu's last ==ERROR== line, or the program's exit status
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleetbench.config.schema import NcuConfig
from fleetbench.errors import UserError

PERMISSION_FIX = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): in a container start it with "
    "--cap-add SYS_ADMIN; on the host load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
    "(a line 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/*.conf, then "
    "reload the driver or reboot), or run ncu as root; see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


@dataclass
class NcuRun:
    """A finished capture: the command run, the report it wrote, ncu's exit status and its output."""

    command: list[str]
    report: Path
    returncode: int
    output: str


def find_ncu(executable: str) -> str:
    """The path of the ncu binary; UserError saying where to get it when it is not on PATH."""
    found = shutil.which(executable)
    if found is None:
        raise UserError(
            f"Nsight Compute's {executable!r} was not found on PATH: install Nsight Compute (it ships with the "
            "CUDA toolkit, e.g. /usr/local/cuda/bin/ncu, or apt install nsight-compute) and put it on PATH, "
            "or set profile.ncu.executable=/path/to/ncu"
        )
    return found


def report_path(path: Path) -> Path:
    """ncu appends .ncu-rep when the name lacks it; make the name say so up front."""
    return path if path.suffix == ".ncu-rep" else path.with_name(path.name + ".ncu-rep")


def ncu_command(ncu: NcuConfig, executable: str, report: Path, program: list[str]) -> list[str]:
    """The ncu command line: full set, clock control and report, the configured filters, then the program."""
    command = [
        executable,
        "--set",
        ncu.set_name,
        "--target-processes",
        ncu.target_processes,
        "--clock-control",
        ncu.clock_control,
        "-f",
        "-o",
        str(report),
    ]
    if ncu.kernel_name:
        command += ["--kernel-name", ncu.kernel_name]
    if ncu.launch_skip is not None:
        command += ["--launch-skip", str(ncu.launch_skip)]
    if ncu.launch_count is not None:
        command += ["--launch-count", str(ncu.launch_count)]
    if ncu.nvtx_include:
        # PyTorch runs backward kernels from autograd's own threads: a thread-scoped range misses them.
        command += ["--nvtx", "--nvtx-include", ncu.nvtx_include, "--nvtx-push-pop-scope", ncu.nvtx_push_pop_scope]
    return command + list(ncu.extra_args) + program


def diagnose(output: str, returncode: int, report: Path) -> None:
    """Raise the UserError that explains a failed capture; return when the report is usable."""
    if "ERR_NVGPUCTRPERM" in output:
        raise UserError(PERMISSION_FIX)
    if "No kernels were profiled" in output:
        raise UserError(
            "ncu profiled no kernels: the program launched no CUDA kernel that the filters let through; "
            "check that it runs on the GPU (device=cuda) and loosen --kernel-name/--launch-skip/--launch-count/"
            "--nvtx-include"
        )
    if not report.is_file():
        errors = [line.strip() for line in output.splitlines() if line.startswith("==ERROR==")]
        why = errors[-1] if errors else f"ncu exited with status {returncode}"
        raise UserError(f"ncu wrote no report {report}: {why}")


def run_ncu(ncu: NcuConfig, report: Path, program: list[str], echo: Callable[[str], None] | None = None) -> NcuRun:
    """Capture `program` under ncu into `report`, passing each output line to `echo` as it comes.

    Raises UserError for a missing program or binary, a capture past `ncu.timeout_s`, or any
    failure `diagnose` recognises.
    """
    if not program:
        raise UserError("no program to profile: fleetbench ncu run [options] -- PROGRAM [ARGS...]")
    executable = find_ncu(ncu.executable)
    report = report_path(report)
    report.parent.mkdir(parents=True, exist_ok=True)
    command = ncu_command(ncu, executable, report, program)
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1
        )
    except OSError as exc:
        raise UserError(f"cannot start {executable}: {exc.strerror or exc}") from None
    lines: list[str] = []

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if echo is not None:
                echo(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        returncode = process.wait(timeout=ncu.timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise UserError(
            f"ncu ran longer than profile.ncu.timeout_s={ncu.timeout_s:g} s and was stopped; "
            "narrow the capture (--kernel-name, --launch-count) or raise the timeout"
        ) from None
    reader.join(timeout=10)
    output = "".join(lines)
    diagnose(output, returncode, report)
    return NcuRun(command=command, report=report, returncode=returncode, output=output)
