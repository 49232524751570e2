"""Config files (YAML and TOML), overrides and their precedence; the sections, presets and docs examples."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from fleetbench.config import load_config
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.config.strict import StrictModel
from fleetbench.config.train import PRESETS, Preset, PresetName
from fleetbench.errors import UserError

REPO = Path(__file__).resolve().parents[1]


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


def section_models(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """Every section model under the root, nested ones included, with its dotted path."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield f"{prefix}{name}", annotation
            yield from section_models(annotation, f"{prefix}{name}.")


SECTIONS = dict(section_models(FleetbenchConfig))


def test_every_section_is_a_strict_model_defined_in_the_config_package() -> None:
    assert {"run", "telemetry", "probe", "train", "profile", "profile.thresholds", "profile.ncu", "edge"} <= set(
        SECTIONS
    )
    for path, model in SECTIONS.items():
        assert issubclass(model, StrictModel), path
        assert model.__module__.startswith("fleetbench.config."), (path, model.__module__)


@pytest.mark.parametrize("path", sorted(SECTIONS))
def test_every_section_rejects_unknown_keys(path: str) -> None:
    with pytest.raises(ValidationError) as info:
        SECTIONS[path].model_validate({"no_such_key": 1})
    assert [error["type"] for error in info.value.errors()] == ["extra_forbidden"]
    with pytest.raises(UserError, match=rf"^--set {path}\.no_such_key=1: {path}\.no_such_key: unknown key; accepted: "):
        load_config(None, [f"{path}.no_such_key=1"])


def test_the_root_rejects_unknown_sections() -> None:
    with pytest.raises(
        UserError,
        match=r"probes: unknown key; accepted: collectives, compare, edge, probe, profile, run, telemetry, trace, train$",
    ):
        load_config(None, ["probes.matmul_sizes=[256]"])


# The presets as they were when they were built from positional arguments; a change here changes
# what every recorded run of that preset means.
PRESET_VALUES = {
    "tiny": {
        "dim": 128,
        "layers": 4,
        "heads": 4,
        "ffn_dim": 512,
        "vocab_size": 256,
        "seq_len": 128,
        "batch_size": 16,
        "steps": 100,
        "data": "text",
        "lr": 2e-3,
        "warmup_steps": 10,
        "about": "CPU default: 0.8M-parameter byte-level model on Python's own sources",
        "model": "seed",
        "kv_heads": None,
    },
    "small": {
        "dim": 512,
        "layers": 8,
        "heads": 8,
        "ffn_dim": 2048,
        "vocab_size": 32000,
        "seq_len": 512,
        "batch_size": 8,
        "steps": 50,
        "data": "random",
        "lr": 3e-4,
        "warmup_steps": 0,
        "about": "quick GPU check: 25M non-embedding parameters",
        "model": "seed",
        "kv_heads": None,
    },
    "seed": {
        "dim": 2048,
        "layers": 12,
        "heads": 16,
        "ffn_dim": 8192,
        "vocab_size": 32000,
        "seq_len": 1024,
        "batch_size": 8,
        "steps": 50,
        "data": "random",
        "lr": 3e-4,
        "warmup_steps": 0,
        "about": "the reference workload: 12 blocks of dim 2048, 8 x 1024 random tokens per rank",
        "model": "seed",
        "kv_heads": None,
    },
    "1b": {
        "dim": 2048,
        "layers": 18,
        "heads": 16,
        "ffn_dim": 8192,
        "vocab_size": 32000,
        "seq_len": 2048,
        "batch_size": 4,
        "steps": 50,
        "data": "random",
        "lr": 3e-4,
        "warmup_steps": 0,
        "about": "about 1.04B parameters (18 blocks of dim 2048)",
        "model": "seed",
        "kv_heads": None,
    },
    "llama3-debug": {
        "dim": 256,
        "layers": 6,
        "heads": 16,
        "ffn_dim": 768,
        "vocab_size": 2048,
        "seq_len": 256,
        "batch_size": 8,
        "steps": 50,
        "data": "text",
        "lr": 8e-4,
        "warmup_steps": 5,
        "about": "CPU default of train.model=llama: torchtitan's Llama 3 debug model (6 blocks of dim 256)",
        "model": "llama",
        "kv_heads": None,
    },
    "llama3-8b": {
        "dim": 4096,
        "layers": 32,
        "heads": 32,
        "ffn_dim": 14336,
        "vocab_size": 128256,
        "seq_len": 8192,
        "batch_size": 1,
        "steps": 50,
        "data": "random",
        "lr": 3e-4,
        "warmup_steps": 0,
        "about": "CUDA default of train.model=llama: Llama-3-8B as torchtitan trains it (8192-token sequences)",
        "model": "llama",
        "kv_heads": 8,
    },
}


def test_presets_keep_their_values() -> None:
    assert {name: dataclasses.asdict(preset) for name, preset in PRESETS.items()} == PRESET_VALUES
    assert list(PRESETS) == list(get_args(PresetName))


def test_presets_are_keyword_only_frozen_and_document_every_field() -> None:
    values = PRESET_VALUES["tiny"]
    make: Any = Preset  # the calls below are wrong on purpose
    with pytest.raises(TypeError, match="positional"):
        make(*values.values())
    preset: Any = make(**values)
    assert preset == PRESETS["tiny"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        preset.dim = 1
    # One docstring line under each field (attribute docstrings), read from the source.
    source = inspect.getsource(Preset)
    for field in dataclasses.fields(Preset):
        assert re.search(rf'^    {field.name}: .+\n    """[^\n]+"""$', source, re.MULTILINE), field.name


def parse(kind: str, body: str) -> dict[str, dict[str, object]]:
    data = yaml.safe_load(body) if kind == "yaml" else tomllib.loads(body)
    assert isinstance(data, dict)
    return data


DOC_EXAMPLES = re.findall(
    r"^```(yaml|toml)\n(.*?)^```$",
    (REPO / "docs" / "configuration.md").read_text(encoding="utf-8"),
    re.MULTILINE | re.DOTALL,
)


def test_docs_have_an_example_for_every_section() -> None:
    covered = {section for kind, body in DOC_EXAMPLES for section in parse(kind, body)}
    assert covered == set(FleetbenchConfig.model_fields)


@pytest.mark.parametrize(
    ("kind", "body"), DOC_EXAMPLES, ids=[f"{kind}-{'-'.join(parse(kind, body))}" for kind, body in DOC_EXAMPLES]
)
def test_docs_examples_load(tmp_path: Path, kind: str, body: str) -> None:
    path = tmp_path / f"example.{kind}"
    path.write_text(body, encoding="utf-8")
    config = load_config(path)
    for section, values in parse(kind, body).items():
        # Each key the example sets reaches the config (none dropped or misspelt into a default).
        assert set(values) <= getattr(config, section).model_fields_set, section


@pytest.mark.parametrize("module", ["fleetbench.config.train", "fleetbench.config"])
def test_config_modules_do_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def field_error(model: type[BaseModel], name: str, value: object) -> str | None:
    """The type of the error `value` gets at field `name` of `model`, None when the field takes it."""
    try:
        model.model_validate({name: value})
    except ValidationError as exc:
        return next((e["type"] for e in exc.errors() if tuple(e["loc"][:1]) == (name,)), None)
    return None


@pytest.mark.parametrize("path", sorted(SECTIONS))
def test_no_field_takes_a_boolean_for_a_number_or_a_number_for_a_boolean(path: str) -> None:
    model = SECTIONS[path]
    for name in model.model_fields:
        takes_true, takes_one = field_error(model, name, True), field_error(model, name, 1)
        assert takes_true is not None or takes_one is not None, f"{path}.{name} takes both true and 1"
        if takes_true is None:  # a boolean field
            assert takes_one == "bool_strict", (path, name, takes_one)
            assert field_error(model, name, "yes") == "bool_strict", (path, name)
        if takes_one is None:  # a number field
            assert takes_true == "number_not_bool", (path, name, takes_true)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("train.grad_clip=.inf", "train.grad_clip: Input should be a finite number (got inf)"),
        ("train.peak_flops=.nan", "train.peak_flops: Input should be a finite number (got nan)"),
        ("train.node_rank=9223372036854775808", "Input should be an integer of at most 64 bits"),
        ("train.fsdp=0", "train.fsdp: Input should be true or false (got 0)"),
        ("train.profile_steps=[true, 4]", "train.profile_steps.0: Input should be an integer, not true or false"),
        ("run.run_id=2024", "(got 2024); quote a number to make it text"),
        ("probe.matmul_sizes=[&a 512, *a]", "values must be unique"),
    ],
)
def test_surprising_coercions_are_refused(override: str, fragment: str) -> None:
    with pytest.raises(UserError) as info:
        load_config(None, [override])
    assert fragment in str(info.value)


def test_yaml_typing_of_numbers_is_kept() -> None:
    config = load_config(
        None, ["train.lr=3e-4", "train.node_rank=9223372036854775807", "probe.min_run_time_s=1", "train.fsdp=off"]
    )
    assert config.train.lr == 3e-4  # PyYAML reads 3e-4 as text; a float field still takes it
    assert config.train.node_rank == 2**63 - 1
    assert config.probe.min_run_time_s == 1.0
    assert config.train.fsdp is False  # YAML's off is a boolean


def test_a_byte_order_mark_is_accepted_and_duplicate_keys_are_not(tmp_path: Path) -> None:
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbfprobe:\n  dtype: float16\n")
    (tmp_path / "bom.toml").write_bytes(b'\xef\xbb\xbf[probe]\ndtype = "float16"\n')
    assert load_config(tmp_path / "bom.yaml").probe.dtype == load_config(tmp_path / "bom.toml").probe.dtype == "float16"
    (tmp_path / "dup.yaml").write_text("probe:\n  dtype: float16\n\n  dtype: float32\n")
    with pytest.raises(
        UserError, match=r"dup.yaml: invalid YAML at line 4: duplicate key 'dtype' \(first at line 2\)$"
    ):
        load_config(tmp_path / "dup.yaml")
    (tmp_path / "alias.yaml").write_text("train: {threads: &t 3}\nprobe: {threads: *t}\n")
    assert load_config(tmp_path / "alias.yaml").probe.threads == 3  # anchors and aliases still work


@pytest.mark.parametrize(
    ("text", "flags", "fragment"),
    [
        ("probe: [1, 2]\n", {"probe.device": ("cpu", "--device")}, "probe: a section holds keys (copy_mib, "),
        (
            "run: 5\n",
            {"run.run_id": ("x", "--run-id")},
            "run: a section holds keys (continues, results_dir, run_id), not 5",
        ),
        ("profile:\n  ncu: 3\n", {}, "profile.ncu: a section holds keys (clock_control, "),
    ],
    ids=["list-section-with-a-flag", "number-section-with-a-flag", "nested-section"],
)
def test_a_section_that_is_no_section_is_blamed_on_the_file_not_the_flag(
    tmp_path: Path, text: str, flags: dict[str, tuple[str, str]], fragment: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        load_config(path, [], flags)
    assert str(caught.value).startswith(f"{path}: ") and fragment in str(caught.value)


def test_a_section_whose_keys_are_all_commented_out_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("probe:\n  # device: cpu\n", encoding="utf-8")
    assert load_config(path).probe == load_config(None).probe
