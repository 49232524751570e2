"""scripts/gpu_check_report.py on a damaged work folder: a stage table with the wrong fields, summaries
that hold NaN, JSON cut short, files that are not text: one `gpu_check_report: error:` line and exit 2,
or (for what is only missing) a report that says it is missing; never a traceback, never NaN in the JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from badinput import record_line
from conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_check_report.py"
RUN = "gpu-check-1"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_report", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPORT = _script()


def _train_line(summary: str) -> str:
    body = json.loads(record_line(f"{RUN}-eager"))
    body.update(benchmark="train")
    text = json.dumps(body)
    return text.replace('"summary": {}', f'"summary": {summary}') + "\n"


def _work(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    for name, content in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return work


def _main(tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = REPORT.main(
        ["--work", str(work), "--run", RUN, "--md", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json")]
    )
    said = capsys.readouterr()
    return code, said.out, said.err


REFUSED = {
    "three-fields": ({"stages.tsv": "train\tok\t0\n"}, "stages.tsv:1: 'train\\tok\\t0' has 3 fields, not 4"),
    "five-fields": ({"stages.tsv": "a\tok\t0\t1\tx\n"}, "has 5 fields, not 4"),
    "unknown-status": ({"stages.tsv": "a\tmaybe\t0\t1\n"}, "has no stage name or an unknown status"),
    "empty-name": ({"stages.tsv": "\tok\t0\t1\n"}, "has no stage name or an unknown status"),
    "name-is-path": ({"stages.tsv": "../x\tok\t0\t1\n"}, "has no stage name or an unknown status"),
    "code-text": ({"stages.tsv": "a\tok\tzero\t1\n"}, "the exit status or seconds is no whole number"),
    "seconds-nan": ({"stages.tsv": "a\tok\t0\tnan\n"}, "the exit status or seconds is no whole number"),
    "seconds-huge": ({"stages.tsv": "a\tok\t0\t" + "9" * 5000 + "\n"}, "the exit status or seconds is no whole number"),
    "seconds-negative": ({"stages.tsv": "a\tok\t0\t-5\n"}, "the exit status or seconds is no whole number"),
    "second-line-bad": ({"stages.tsv": "a\tok\t0\t1\nb\n"}, "stages.tsv:2: 'b' has 1 fields"),
    "stages-not-utf8": ({"stages.tsv": b"a\tok\t0\t1\n\xff\xfe\n"}, "cannot read the work folder"),
    "cmd-not-utf8": ({"stages.tsv": "a\tok\t0\t1\n", "logs/a.cmd": b"\xff\n"}, "cannot read the work folder"),
    "record-damaged": ({"results/gpu-check-1-eager/records.jsonl": "{not json\n"}, ""),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_damaged_work_folder_is_one_line_and_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files, fragment = REFUSED[name]
    code, _, err = _main(tmp_path, _work(tmp_path, files), capsys)
    if name == "record-damaged":  # a run that wrote no readable record is reported as missing, as before
        assert code == 0 and not err
        return
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check_report: error: ") and fragment in lines[0], err
    assert not (tmp_path / "r.md").exists() and not (tmp_path / "r.json").exists()


def test_a_missing_work_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(tmp_path, tmp_path / "nowhere", capsys)
    assert code == 2 and "--work" in err and "is not a folder" in err


@pytest.mark.parametrize(
    "summary",
    [
        '{"mfu": NaN, "tokens_per_s": Infinity}',
        '{"precision": "bf16", "mfu": "high"}',
        '{"tflops_per_device": -Infinity}',
    ],
)
def test_summaries_that_are_no_figures_are_reported_as_missing(
    summary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = _work(tmp_path, {"stages.tsv": "train-eager\tok\t0\t4\n",
                            "results/gpu-check-1-eager/records.jsonl": _train_line(summary),
                            "ncu_summary.json": '{"kernels": [{"sol": NaN}]}', "trace_summary.json": '{"cut": '})  # fmt: skip
    code, _, err = _main(tmp_path, work, capsys)
    assert code == 0, err
    data = json.loads((tmp_path / "r.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["trace_summary"] is None
    assert "NaN" not in (tmp_path / "r.md").read_text() and "nan" not in (tmp_path / "r.md").read_text().split("|")[1:]


@pytest.mark.parametrize("name", ["trace_summary.json", "ncu_summary.json"])
@pytest.mark.parametrize("kind", ["nested-deep", "fifo"])
def test_summaries_nested_thousands_deep_or_fifos_are_reported_as_missing(
    name: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A summary nested 100,000 deep crashed the report (RecursionError); a FIFO in its place kept it waiting."""
    import os

    work = _work(tmp_path, {"stages.tsv": "a\tok\t0\t1\n"})
    if kind == "fifo":
        os.mkfifo(work / name)
    else:
        (work / name).write_text("[" * 100_000)
    code, _, err = _main(tmp_path, work, capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())[name.removesuffix(".json")] is None
