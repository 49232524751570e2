"""Reading an Nsight Compute report imports no torch: a profiler host may not have it, and importing
it costs more than reading the report.

Each case runs the real entry point (`python -X importtime -m fleetbench ...`) in a fresh process and
reads the modules it imported from Python's own import log on stderr.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testdata import get_test_data_dir

REP = get_test_data_dir() / "ncu-rep" / "a10_inference_105_kernels.ncu-rep"
CSV = get_test_data_dir() / "ncu-csv" / "rtx5070_details_saxpy.csv"
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|(?P<indent>\s*)(?P<module>\S+)$")
NO_REP_READER = importlib.util.find_spec("ncu_report") is None


def imported_by(args: list[str], cwd: Path) -> set[str]:
    """The top-level packages `fleetbench ARGS` imports, from -X importtime; the command must succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETBENCH_")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fleetbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )
    log = [m for line in done.stderr.splitlines() if (m := IMPORT_LINE.match(line))]
    assert done.returncode == 0, done.stderr[-2000:]
    assert log, "no -X importtime lines on stderr"
    return {m["module"].split(".")[0] for m in log}


@pytest.mark.realdata
@pytest.mark.parametrize(
    "report",
    [
        pytest.param(REP, marks=pytest.mark.skipif(NO_REP_READER, reason="needs ncu-report (the ncu extra)")),
        CSV,
    ],
    ids=["ncu-rep", "csv"],
)
@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["table", "json"])
def test_ncu_summarize_imports_neither_torch_nor_matplotlib(report: Path, flags: list[str], tmp_path: Path) -> None:
    modules = imported_by(["ncu", "summarize", *flags, str(report)], tmp_path)
    assert "fleetbench" in modules
    assert not modules & {"torch", "matplotlib"}, sorted(modules & {"torch", "matplotlib"})


@pytest.mark.realdata
def test_roofline_of_an_ncu_report_imports_no_torch(tmp_path: Path) -> None:
    modules = imported_by(["roofline", "--ncu", str(CSV), "--results-dir", str(tmp_path / "results")], tmp_path)
    assert "matplotlib" in modules  # it draws the chart ...
    assert "torch" not in modules  # ... from the report's figures and the datasheet, without torch
    assert list((tmp_path / "results").glob("*/roofline/roofline.png"))


def test_the_command_table_names_what_each_module_registers() -> None:
    """The CLI imports only the module of the command it runs, found through COMMANDS."""
    import argparse

    from fleetbench.cli import main as cli_main

    for module_name in dict.fromkeys(cli_main.COMMANDS.values()):
        parser = argparse.ArgumentParser()
        commands = parser.add_subparsers()
        cli_main.command_module(module_name).register(commands)
        expected = sorted(name for name, owner in cli_main.COMMANDS.items() if owner == module_name)
        assert sorted(commands.choices) == expected, module_name


def test_a_summary_without_config_uses_the_config_defaults() -> None:
    """`ncu summarize` without --config/--set skips validating a config; its settings must be the defaults."""
    from fleetbench.cli import profile_cmd
    from fleetbench.config.profile import ProfileConfig
    from fleetbench.profile.classify import Thresholds, thresholds_of

    defaults = ProfileConfig()
    assert defaults.top == profile_cmd.SUMMARY_TOP
    assert Thresholds() == thresholds_of(defaults)


@pytest.mark.realdata
def test_a_summary_with_set_reads_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from fleetbench.cli import main as cli_main

    report = str(get_test_data_dir() / "ncu-csv" / "v100_details_cutlass_cublas_tensor_gemm.csv")  # 4 kernels
    assert cli_main.main(["ncu", "summarize", "--json", report]) == 0
    assert len(json.loads(capsys.readouterr().out)["overview"]["top_kernels"]) == 4
    assert cli_main.main(["ncu", "summarize", "--json", report, "--set", "profile.top=2"]) == 0
    assert len(json.loads(capsys.readouterr().out)["overview"]["top_kernels"]) == 2
    assert cli_main.main(["ncu", "summarize", report, "--set", "profile.top=0"]) == 2  # validated: top >= 1
    assert "profile.top" in capsys.readouterr().err
