"""What is stored is checked when it is made, with the rule its reader applies later.

A noise calibration (`noise.store`) and a baseline (`baselines.set_baseline`) are parsed back, by the
reader's own function, from the very text about to be written: a calibration that compare would refuse
(a figure whose processes measured 0, so its noise is infinite and written as null) is refused with
one line and no file, instead of breaking every later compare of the machine class. Hypothesis drives
the writer with per-process figures that are ordinary, zero, tiny or huge, and the calibration reader
with files whose fields are replaced by other JSON values; and `slurm submit --time` with any text.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetbench.compare import noise
from fleetbench.compare.baselines import Baseline, read_baseline, set_baseline
from fleetbench.errors import UserError
from fleetbench.results.record import HeadlineFigure, ResultRecord

FLOPS = "fleetbench_probe_achieved_flop_per_second"
MACHINE = {"cpu_model": "Test CPU", "cpu_count": "4"}
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def record(value: float, run_id: str = "r") -> ResultRecord:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return ResultRecord(
        run_id=run_id, benchmark="probe", host="h", device="cpu", backend="cpu", status="ok", start=start, end=start,
        duration_s=1.0, git_revision="unknown", packages={}, machine=MACHINE,
        headline=[HeadlineFigure(metric=FLOPS, labels={"probe": "matmul"}, value=value, samples=[value])],
    )  # fmt: skip


def calibration_of(values: list[float]) -> noise.Calibration:
    return noise.estimate([[record(v)] for v in values], MACHINE, ["probe"])


def test_a_calibration_compare_would_refuse_is_refused_when_made_and_nothing_is_filed(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        noise.store(tmp_path, calibration_of([1e9, 0.0, 1.1e9, 0.9e9]))  # one process measured 0: noise is inf
    said = str(caught.value)
    assert "is not filed" in said and "noise_pct None" in said and "\n" not in said
    assert not (tmp_path / noise.CALIBRATION_FOLDER).exists() or not any(
        (tmp_path / noise.CALIBRATION_FOLDER).iterdir()
    )


def test_a_calibration_that_is_filed_reads_back_as_it_was_made(tmp_path: Path) -> None:
    made = calibration_of([1e9, 1.02e9, 0.99e9, 1.01e9])
    path = noise.store(tmp_path, made)
    assert noise.read(path) == made


def test_a_baseline_whose_calibration_the_reader_would_refuse_is_not_written(tmp_path: Path) -> None:
    bad = noise.Calibration(MACHINE, "2026-01-01", ["probe"], 4,
                            [noise.NoiseFigure("probe", FLOPS, {"probe": "matmul"}, 1.0, 4, -5.0, 1.0)])  # fmt: skip
    with pytest.raises(UserError, match=r"baseline main \(not written\): not a baseline file: .*median -5.0"):
        set_baseline(tmp_path, Baseline("main", "r", "r", "", [record(1e9)], 1, bad))
    assert not (tmp_path / "baselines" / "main.json").exists()
    good = noise.Calibration(MACHINE, "2026-01-01", ["probe"], 4,
                             [noise.NoiseFigure("probe", FLOPS, {"probe": "matmul"}, 1.0, 4, 1e9, 1.0)])  # fmt: skip
    set_baseline(tmp_path, Baseline("main", "r", "r", "", [record(1e9)], 1, good))
    assert read_baseline(tmp_path, "main").noise == good


VALUES = st.sampled_from([1e9, 1.01e9, 0.0, 5e-324, 1e-300, 1e300, 1.7e308, 3.0, 1e9 * 50])


@FUZZ
@given(values=st.lists(VALUES, min_size=3, max_size=8))
def test_whatever_the_processes_measured_a_filed_calibration_is_one_compare_reads(values: list[float]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        try:
            path = noise.store(root, calibration_of(values))
        except UserError as exc:
            assert "\n" not in str(exc) and "is not filed" in str(exc)
            assert not list(root.rglob("*.json")), "a refused calibration left a file"
        else:
            found = noise.read(path)
            assert found is not None
            assert all(0 <= f.noise_pct <= noise.MAX_NOISE_PCT for f in found.figures)


FIELDS = ["machine", "processes", "figures", "set_at", "figure.labels", "figure.noise_pct", "figure.best_noise_pct",
          "figure.processes", "figure.median", "figure.metric"]  # fmt: skip
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(field=st.sampled_from(FIELDS), value=JSON_VALUES, depth=st.sampled_from([0, 0, 5000]))
def test_a_damaged_calibration_reads_or_is_one_line(tmp_path: Path, field: str, value: object, depth: int) -> None:
    data = calibration_of([1e9, 1.02e9, 0.99e9]).to_json()
    target = data["figures"][0] if field.startswith("figure.") else data
    target[field.removeprefix("figure.")] = value
    text = json.dumps(data)
    if depth:
        text = "[" * depth + text + "]" * depth
    path = tmp_path / "noise-x.json"
    path.write_text(text, encoding="utf-8")
    try:
        found = noise.read(path)
    except UserError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert found is not None
        for figure in found.figures:
            assert 0 <= figure.noise_pct <= noise.MAX_NOISE_PCT and figure.processes >= 3
            assert math.isfinite(figure.median) and figure.median >= 0
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in figure.labels.items())


@FUZZ
@given(text=st.text(alphabet="0123456789:-UNLIMTED ", max_size=40) | st.just("9" * 5000))
def test_slurm_time_limits_are_accepted_in_slurms_range_or_refused_in_one_line(text: str) -> None:
    from fleetbench.slurm.script import MAX_MINUTES, JobRequest, _minutes

    try:
        JobRequest(time_limit=text).validate()
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--time ")
    else:
        assert 0 <= _minutes(text) < MAX_MINUTES
