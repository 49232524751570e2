"""Fuzzing, round 4: the name and path rule, the header readers `edge` uses on files a user names (the
checkpoint sniffer that tells GGUF, safetensors, .pte, zip and pickle apart; the ExecuTorch program
check), the checkpoint loader itself, and the config loader on paths and YAML aliases.

Each reader gets arbitrary bytes or text and mutations of valid headers, and must answer with a result
or one UserError; never another exception. Examples are derandomized and few (seconds per test).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fleetbench.cli.parser import OneLineParser
from fleetbench.config.loader import load_config
from fleetbench.errors import UserError
from fleetbench.names import NAME_MAX_BYTES, PATH_MAX_BYTES, name_problem, path_problem

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FAST = settings(
    max_examples=150, deadline=2000, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=600) | st.just("é" * 130)


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-names-") as path:
        yield Path(path)


@FAST
@given(TEXT)
def test_the_path_rule_accepts_exactly_what_the_file_system_takes(value: str) -> None:
    problem = path_problem(value)
    encoded = os.fsencode(value) if value else b""
    fits = (
        bool(value)
        and len(encoded) < PATH_MAX_BYTES
        and all(len(part) <= NAME_MAX_BYTES for part in encoded.split(b"/"))
        and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
    )
    assert (problem is None) == fits, (value[:80], problem)
    if problem is not None:
        assert "\n" not in problem and len(problem) < 300  # one line, the value cut


@FAST
@given(TEXT)
def test_a_name_is_a_path_of_one_component(value: str) -> None:
    problem = name_problem(value)
    if problem is None:
        assert path_problem(value) is None and "/" not in value and value not in {".", ".."}
    else:
        assert "\n" not in problem and len(problem) < 300


@FAST
@given(TEXT)
def test_the_parser_refuses_a_bad_path_argument_in_one_line(value: str) -> None:
    parser = OneLineParser(prog="t")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--run-prefix")  # a name the parser checks (run ids have a stricter rule of their own)
    try:
        parsed = parser.parse_args(["--out", value, "--run-prefix", value])
    except UserError as exc:
        assert "argument --out" in str(exc) or "argument --run-prefix" in str(exc)
        return
    assert path_problem(str(parsed.out)) is None and name_problem(parsed.run_prefix) is None


# --- headers of the files `edge` is given ---------------------------------------------------------------------------
GGUF = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") * 2
SAFETENSORS = (2).to_bytes(8, "little") + b"{}"
PTE = (28).to_bytes(4, "little") + b"ET12" + b"eh00" + (24).to_bytes(4, "little") + (64).to_bytes(8, "little") * 2
ZIP = b"PK\x03\x04" + bytes(26)
PICKLE = b"\x80\x02}q\x00."
HEADERS = (GGUF, SAFETENSORS, PTE, ZIP, PICKLE)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A valid header, or random bytes, then cut, flipped or extended."""
    data = bytearray(draw(st.sampled_from(HEADERS) | st.binary(max_size=96)))
    for _ in range(draw(st.integers(0, 3))):
        if data and draw(st.booleans()):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
    data = data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data
    return bytes(data) + draw(st.binary(max_size=64))


@pytest.fixture(scope="module")
def source() -> ModuleType:
    """The checkpoint reader's module, imported before the examples run (torch takes seconds to load)."""
    pytest.importorskip("torch")
    import fleetbench.edge.llm.source

    return fleetbench.edge.llm.source


@FAST
@given(damaged())
def test_the_checkpoint_sniffer_names_every_file_or_hands_it_to_torch(source: ModuleType, data: bytes) -> None:
    kind = source.file_kind(data[:64], len(data))
    if kind is None:
        assert data[:4] == b"PK\x03\x04" or data[:1] == b"\x80"
    else:
        assert "\n" not in kind and len(kind) < 200


@pytest.fixture(scope="module")
def pte() -> ModuleType:
    import fleetbench.edge.pte

    return fleetbench.edge.pte


@FAST
@given(damaged())
def test_the_pte_check_answers_every_header_with_none_or_one_line(folder: Path, pte: ModuleType, data: bytes) -> None:
    path = folder / "m.pte"
    path.write_bytes(data)
    try:
        pte.check_program_file(path)
    except UserError as exc:
        assert "\n" not in str(exc)


@pytest.fixture(scope="module")
def model() -> object:
    pytest.importorskip("torch")
    from fleetbench.edge.llm.source import build_llama

    return build_llama("llama3-debug", 0)


@settings(max_examples=60, deadline=5000, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(damaged())
def test_the_checkpoint_loader_loads_or_refuses_in_one_line(folder: Path, model: object, data: bytes) -> None:
    from fleetbench.edge.llm.source import _load

    path = folder / "c.pt"
    path.write_bytes(data)
    with pytest.raises(UserError) as refused:  # none of these is a checkpoint of the model
        _load(model, path)  # type: ignore[arg-type]
    assert "\n" not in str(refused.value) and str(path) in str(refused.value)


# --- the config loader on paths and aliases --------------------------------------------------------------------------
@FAST
@given(TEXT, st.sampled_from(["run.results_dir", "telemetry.spool_dir", "telemetry.textfile_dir", "edge.thermal_root"]))
def test_a_path_in_a_config_obeys_the_rule_or_is_refused_naming_the_key(value: str, key: str) -> None:
    try:
        config = load_config(None, [], {key: (value, "--flag")})
    except UserError as exc:
        assert "\n" not in str(exc) and "--flag" in str(exc)
        return
    section, name = key.split(".")
    stored = getattr(getattr(config, section), name)
    assert stored is None or path_problem(str(stored)) is None


@st.composite
def aliased_yaml(draw: st.DrawFn) -> str:
    """Anchors that refer to earlier ones, so expansion multiplies: small texts, up to huge documents."""
    levels = draw(st.integers(1, 9))
    width = draw(st.integers(1, 12))
    lines = ["a0: &a0 [1]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    lines.append(f"probe:\n  matmul_sizes: *a{levels - 1}")
    return "\n".join(lines) + "\n"


@FAST
@given(aliased_yaml())
def test_yaml_aliases_are_counted_expanded_and_refused_past_the_limit(folder: Path, text: str) -> None:
    path = folder / "c.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as refused:  # unknown top-level keys or sizes that are no list of ints
        load_config(path)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 2000
