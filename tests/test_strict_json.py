"""Every JSON text the suite writes is strict JSON: NaN and infinities are null, never bare tokens.

The writers go through `fleetbench.jsonio`; a json.dump/json.dumps call anywhere else in the
package fails the first test, naming it, so a new writer cannot slip past the rule.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleetbench import jsonio
from fleetbench.cli import main as cli_main
from fleetbench.results.record import MetricSample, ResultRecord
from testdata import get_test_data_dir

PACKAGE = Path(__file__).resolve().parents[1] / "benchmarks" / "fleetbench"
HELPER = PACKAGE / "jsonio.py"
WRITERS = {"dump", "dumps"}


def _refuse_constant(token: str) -> None:
    raise ValueError(f"non-strict JSON token {token}")


def strict_loads(text: str) -> Any:
    """json.loads that refuses NaN, Infinity and -Infinity, as strict readers do."""
    return json.loads(text, parse_constant=_refuse_constant)


def _bare_writers(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """`file:line call` of each json.dump/json.dumps (or JSONEncoder) use in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    json_names = {"json"}  # `import json as j` too
    direct: set[str] = set()  # `from json import dumps`
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            json_names |= {a.asname or a.name for a in node.names if a.name == "json"}
        elif isinstance(node, ast.ImportFrom) and node.module == "json":
            direct |= {a.asname or a.name for a in node.names if a.name in WRITERS | {"JSONEncoder"}}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        bare = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in json_names
            and func.attr in WRITERS | {"JSONEncoder"}
        ) or (isinstance(func, ast.Name) and func.id in direct)
        # a standalone module (copied to nodes without fleetbench) may call json itself, strictly
        strict = any(
            k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords
        )
        if bare and not strict:
            found.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(func)}(...)")
    return found


def test_every_json_writer_goes_through_the_strict_helper() -> None:
    offenders = [hit for path in sorted(PACKAGE.rglob("*.py")) if path != HELPER for hit in _bare_writers(path)]
    assert not offenders, (
        "JSON written without fleetbench.jsonio (bare NaN/Infinity would reach strict readers); "
        "use jsonio.dumps/jsonio.dump instead:\n  " + "\n  ".join(offenders)
    )


def test_the_scan_finds_a_bare_writer(tmp_path: Path) -> None:
    module = tmp_path / "writer.py"
    module.write_text("import json as j\nfrom json import dumps\nj.dump({}, None)\ndumps(1)\n", encoding="utf-8")
    hits = _bare_writers(module, tmp_path)
    assert [h.split(" ", 1)[1] for h in hits] == ["j.dump(...)", "dumps(...)"]


def test_result_records_write_non_finite_floats_as_null() -> None:
    # records.jsonl comes from pydantic's model_dump_json, whose default (ser_json_inf_nan="null") is
    # strict; no model of the package may change that.
    changed = [p.name for p in PACKAGE.rglob("*.py") if "ser_json_inf_nan" in p.read_text(encoding="utf-8")]
    assert not changed, f"ser_json_inf_nan set in {changed}: written JSON must stay strict"
    now = datetime.now(UTC)
    record = ResultRecord(
        run_id="r",
        benchmark="ncu",
        host="h",
        device="d",
        backend="cpu",
        status="ok",
        config={"ratio": math.inf},
        metrics=[MetricSample(name="fleetbench_x", value=math.nan)],
        summary={"not_measured": math.nan, "nested": {"ratio": -math.inf}},
        start=now,
        end=now,
        duration_s=1.0,  # a duration must be a finite number: ResultRecord refuses NaN
        git_revision="0",
        packages={},
    )
    data = strict_loads(record.model_dump_json())
    assert data["summary"] == {"not_measured": None, "nested": {"ratio": None}}
    assert data["metrics"][0]["value"] is None and data["config"] == {"ratio": None}


@dataclass
class _Inner:
    value: float
    values: tuple[float, ...]


@dataclass
class _Outer:
    name: str
    inner: _Inner
    extra: dict[str, Any] = field(default_factory=dict)


def test_helper_writes_nan_and_infinities_as_null_through_nesting() -> None:
    nan, inf = math.nan, math.inf
    payload = {
        "a": nan,
        "b": [1.0, inf, -inf, {"c": (nan, 2)}],
        "d": _Outer("x", _Inner(nan, (inf, 3.5)), {"e": [nan]}),
        "f": [_Inner(1.0, ())],
        nan: "key",
        "ok": [0, 1.5, "s", None, True],
    }
    data = strict_loads(jsonio.dumps(payload, indent=1, sort_keys=False))
    assert data == {
        "a": None,
        "b": [1.0, None, None, {"c": [None, 2]}],
        "d": {"name": "x", "inner": {"value": None, "values": [None, 3.5]}, "extra": {"e": [None]}},
        "f": [{"value": 1.0, "values": []}],
        "nan": "key",
        "ok": [0, 1.5, "s", None, True],
    }
    assert jsonio.dumps({"x": 1.0, "y": [2]}) == json.dumps({"x": 1.0, "y": [2]})  # finite data: unchanged text


def test_helper_file_writer_and_its_fallbacks() -> None:
    handle = io.StringIO()
    jsonio.dump({"a": [math.nan]}, handle, allow_nan=True)  # allow_nan cannot be turned back on
    assert strict_loads(handle.getvalue()) == {"a": [None]}

    class Box:
        def __init__(self, value: float) -> None:
            self.value = value

    assert strict_loads(jsonio.dumps(Box(math.inf), default=lambda o: {"v": o.value})) == {"v": None}

    class Encoder(json.JSONEncoder):
        def default(self, o: Any) -> Any:
            return [o.value, o.value] if isinstance(o, Box) else super().default(o)

    assert strict_loads(jsonio.dumps({"b": Box(math.nan)}, cls=Encoder, indent=1)) == {"b": [None, None]}
    with pytest.raises(TypeError):
        jsonio.dumps({"b": object()})


def _csv_with_unmeasured_kernel(tmp_path: Path) -> Path:
    """A copy of the saxpy details export whose (only) kernel ncu could not measure: every value nan."""
    source = get_test_data_dir() / "ncu-csv" / "rtx5070_details_saxpy.csv"
    lines = source.read_text(encoding="utf-8-sig").splitlines(keepends=True)
    header_at = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    kernel_id = next(csv.reader([lines[header_at + 1]]))[0]
    out = lines[: header_at + 1]
    for line in lines[header_at + 1 :]:
        row = next(csv.reader([line]))
        if row and row[0] == kernel_id:
            row[-1] = "nan"
            buffer = io.StringIO()
            csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(row)
            line = buffer.getvalue()
        out.append(line)
    path = tmp_path / "saxpy_not_measured.csv"
    path.write_text("".join(out), encoding="utf-8")
    assert sum(line.endswith('"nan"\n') for line in out) >= 5
    return path


@pytest.mark.realdata
def test_ncu_summarize_json_of_an_unmeasured_kernel_is_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _csv_with_unmeasured_kernel(tmp_path)
    assert cli_main.main(["ncu", "summarize", "--json", str(report)]) == 0
    data = strict_loads(capsys.readouterr().out)
    (kernel,) = data["kernels"]
    assert "saxpy" in kernel["name"]
    assert kernel["duration_s"] is None and kernel["memory_sol"] is None  # not measured: null, not NaN


def test_a_diverged_loss_round_trips_through_the_step_history(tmp_path: Path) -> None:
    from fleetbench.train.history import HISTORY_FILE, HistoryWriter, StepRow, read_history

    row = StepRow(1, math.nan, math.inf, 0.1, 0.0, 10.0, 5.0, 1.0, None, 0, 1e-3, 0)
    writer = HistoryWriter(tmp_path)
    writer.append(row)
    writer.close()
    strict_loads((tmp_path / HISTORY_FILE).read_text(encoding="utf-8"))
    (back,) = read_history(tmp_path)
    assert math.isnan(back.loss) and math.isnan(back.grad_norm) and back.mfu is None and back.step_s == 0.1
