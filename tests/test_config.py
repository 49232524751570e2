"""Config files (YAML and TOML), overrides and their precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetbench.config import load_config
from fleetbench.errors import UserError


def test_yaml_and_toml_give_the_same_config(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("probe:\n  matmul_sizes: [128, 256]\n  dtype: bfloat16\nrun:\n  run_id: r-1\n")
    (tmp_path / "c.toml").write_text('[probe]\nmatmul_sizes = [128, 256]\ndtype = "bfloat16"\n[run]\nrun_id = "r-1"\n')
    assert load_config(tmp_path / "c.yaml") == load_config(tmp_path / "c.toml")
    assert load_config(tmp_path / "c.yaml").probe.matmul_sizes == [128, 256]


def test_overrides_win_over_the_file_and_flags_win_over_overrides(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("probe:\n  min_run_time_s: 1.0\nrun:\n  run_id: from-file\n")
    config = load_config(
        tmp_path / "c.yaml",
        ["probe.min_run_time_s=0.25", "probe.copy_mib=[]", "run.run_id=from-set"],
        {"run.run_id": ("from-flag", "--run-id")},
    )
    assert config.probe.min_run_time_s == 0.25
    assert config.probe.copy_mib == []
    assert config.run.run_id == "from-flag"


def test_defaults_without_a_file() -> None:
    config = load_config()
    assert config.telemetry.pushgateway is None
    assert config.run.results_dir == Path("results")


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["probe.matmul_sizes=[8]"], "probe.matmul_sizes.0: Input should be greater than or equal to 16"),
        (["probe.dtype=int8"], "Input should be 'float32', 'float16' or 'bfloat16'"),
        (["probe.speed=fast"], "probe.speed: unknown key; accepted: copy_mib, device, dtype,"),
        (["telemetry.pushgateway=localhost:9091"], "is not an http(s) URL"),
        (["telemetry.push_retries=11"], "less than or equal to 10"),
        (["probe.matmul_sizes=[256,256]"], "values must be unique"),
    ],
)
def test_errors_name_the_source_the_key_and_what_is_accepted(overrides: list[str], fragment: str) -> None:
    with pytest.raises(UserError) as info:
        load_config(None, overrides)
    message = str(info.value)
    assert message.startswith(f"--set {overrides[0]}: ")
    assert fragment in message
    assert "\n" not in message
