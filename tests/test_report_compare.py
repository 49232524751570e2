"""The report's headline table and `fleetbench report RUN --compare BASE`, on real small runs of the suite.

The pages are read back with the standard library's html.parser: structure (tables, <details>, the
inlined images) is checked on the parsed tree, not by searching the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import run_cli
from fleetbench.compare.formats import COLUMNS
from fleetbench.report.headline import headline_cell, pick_figures
from fleetbench.report.page import data_uri
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import RECORDS_FILE, read_records

VERDICTS = {"better", "worse", "no significant change", "no direction", "not enough independent samples to judge",
            "unstable"}  # fmt: skip
NOT_ENOUGH = "not enough independent samples to judge"  # a single pair of runs without a noise calibration
PROBE = (
    "--set", "probe.threads=1", "--set", "probe.matmul_sizes=[128]", "--set", "probe.copy_mib=[1]",
    "--set", "probe.min_run_time_s=0.05",
)  # fmt: skip
TRAIN = (
    "--nproc", "1", "--device", "cpu", "--preset", "tiny", "--steps", "6", "--set", "train.log_every=1",
)  # fmt: skip
VOID = {"img", "meta", "br", "hr", "link", "input"}


# --- the page as a tree ----------------------------------------------------------------------------
@dataclass
class Node:
    """One element of the page: its tag, attributes and children (elements and text)."""

    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str, cls: str | None = None) -> list[Node]:
        found = []
        for child in self.children:
            if isinstance(child, Node):
                if child.tag == tag and (cls is None or cls in child.attrs.get("class", "").split()):
                    found.append(child)
                found += child.find_all(tag, cls)
        return found


class TreeBuilder(HTMLParser):
    """A tree of the page's elements; character references are already decoded in the text."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Node("document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: Path) -> Node:
    builder = TreeBuilder()
    builder.feed(page.read_text(encoding="utf-8"))
    builder.close()
    return builder.root


def headline_cells(root: Node) -> list[Node]:
    return root.find_all("td", "headline")


def comparison_tables(root: Node) -> list[list[list[str]]]:
    """Each comparison table as rows of cell texts, the header row first."""
    return [
        [[cell.text() for cell in row.children if isinstance(cell, Node)] for row in table.find_all("tr")]
        for table in root.find_all("table", "compare")
    ]


# --- real runs -------------------------------------------------------------------------------------
def cli_ok(*args: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two probe runs and two six-step train runs of the tiny preset, one results root."""
    results = tmp_path_factory.mktemp("report-compare")
    for run_id in ("p1", "p2"):
        cli_ok("probe", "--results-dir", str(results), "--run-id", run_id, *PROBE)
    for run_id in ("t1", "t2"):
        cli_ok("train", "--results-dir", str(results), "--run-id", run_id, *TRAIN)
    return results


def report(root: Path, *args: str) -> tuple[int, str, str]:
    result = run_cli("report", "--results-dir", str(root), "--offline", *args)
    return result.returncode, result.stdout, result.stderr


def test_train_report_shows_headline_summary_comparison_and_overlay(root: Path) -> None:
    code, out, err = report(root, "t2", "--compare", "t1")
    assert code == 0, err
    page = root / "t2" / "report" / "index.html"
    assert out == "" and f"report: {page}" in err
    tree = parse(page)
    (cell,) = headline_cells(tree)
    key = cell.find_all("div", "key")[0].text()
    assert "loss " in key and " → " in key and "tokens/s" in key and "MFU" in key
    figures = [item.text() for item in cell.find_all("ul", "figures")[0].find_all("li")]
    assert any(f.startswith("train_device_tokens_per_second") for f in figures)
    assert any(f.startswith("step_seconds") and " ms" in f for f in figures)
    (details,) = cell.find_all("details")
    assert details.find_all("summary")[0].text() == "full summary"
    record = read_records(root / "t2")[0]
    assert json.loads(details.find_all("pre")[0].text()) == json.loads(json.dumps(record.summary, default=str))

    headings = [h.text() for h in tree.find_all("h2")]
    assert "Comparison with t1" in headings
    assert any(h.text().startswith("train: t1 -> t2") for h in tree.find_all("h3"))
    (table,) = comparison_tables(tree)
    assert tuple(table[0]) == COLUMNS
    rows = {row[0]: row for row in table[1:]}
    assert rows["train_device_tokens_per_second"][-1] in VERDICTS
    assert rows["train_loss"][-1] == NOT_ENOUGH  # one run a side: shown, not judged

    png = root / "t2" / "report" / "compare" / "train_overlay.png"
    assert png.stat().st_size > 10_000
    sources = [img.attrs["src"] for img in tree.find_all("img")]
    assert data_uri(png) in sources


def test_probe_report_against_itself_is_no_change_and_draws_no_overlay(root: Path) -> None:
    code, _, err = report(root, "p2", "--compare", "p2")
    assert code == 0, err
    tree = parse(root / "p2" / "report" / "index.html")
    (cell,) = headline_cells(tree)
    assert "GFLOP/s" in cell.text() and "GB/s" in cell.text() and "best matmul" in cell.text()
    (table,) = comparison_tables(tree)
    assert {row[-1] for row in table[1:]} == {NOT_ENOUGH}  # one run a side: shown, not judged
    assert not (root / "p2" / "report" / "compare").exists()  # probe has no curves to overlay


def test_against_a_baseline_the_page_says_the_curves_are_not_available(root: Path) -> None:
    cli_ok("baseline", "--results-dir", str(root), "set", "main", "t1")
    code, _, err = report(root, "t2", "--compare", "main")
    assert code == 0, err
    tree = parse(root / "t2" / "report" / "index.html")
    assert "Comparison with baseline main (t1)" in [h.text() for h in tree.find_all("h2")]
    notes = [p.text() for p in tree.find_all("p", "meta")]
    assert any("train curves of baseline main (t1): not available" in n for n in notes)
    assert comparison_tables(tree) and not list((root / "t2" / "report" / "compare").glob("*.png"))


def test_a_mismatched_base_is_shown_not_compared(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "p1-elsewhere"
    elsewhere.mkdir()
    moved = [r.model_copy(update={"device": "another cpu"}) for r in read_records(root / "p1")]
    (elsewhere / RECORDS_FILE).write_text("".join(r.model_dump_json() + "\n" for r in moved))
    code, _, err = report(root, "p2", "--compare", str(elsewhere))
    assert code == 0, err
    tree = parse(root / "p2" / "report" / "index.html")
    (mismatch,) = tree.find_all("p", "mismatch")
    assert mismatch.text().startswith("mismatch (not compared): device: another cpu -> ")
    assert comparison_tables(tree) == []
    code, _, err = report(root, "p2", "--compare", str(elsewhere), "--allow-mismatch")
    tree = parse(root / "p2" / "report" / "index.html")
    assert code == 0 and "compared anyway" in tree.find_all("p", "mismatch")[0].text()
    assert len(comparison_tables(tree)) == 1


@pytest.mark.parametrize(
    ("base", "extra", "message"),
    [
        ("nope", (), "run 'nope' not found"),
        ("EMPTY", (), "no result records"),
        ("broken", (), "not a baseline file"),
        ("t1", ("--set", "compare.alpha=0.01"), "share no benchmark"),
    ],
)
def test_a_bad_base_is_one_line_and_writes_no_report(
    root: Path, tmp_path: Path, base: str, extra: tuple[str, ...], message: str
) -> None:
    baselines = root / "baselines"
    baselines.mkdir(exist_ok=True)
    (baselines / "broken.json").write_text('{"name": "broken", "records": [')
    if base == "EMPTY":
        base = str(tmp_path)
    code, out, err = report(root, "p1", "--compare", base, *extra)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (root / "p1" / "report").exists()


# --- edge (a Vulkan adapter: lavapipe on machines without a GPU) -------------------------------------
@pytest.mark.vulkan
def test_edge_report_draws_latency_boxes_of_both_runs(vulkan: None, tmp_path: Path) -> None:
    for run_id in ("e1", "e2"):
        result = run_cli(
            "edge", "run", "--quick", "--kernels", "silu,gemm_vec4", "--results-dir", str(tmp_path),
            "--run-id", run_id, unset=("WGPU_BACKEND_TYPE",),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    code, _, err = report(tmp_path, "e2", "--compare", "e1")
    assert code == 0, err
    tree = parse(tmp_path / "e2" / "report" / "index.html")
    (cell,) = headline_cells(tree)
    assert "p50 latency" in cell.find_all("div", "key")[0].text()
    assert "edge_kernel_latency_percentile_seconds" in cell.text() and " ms" in cell.text()
    (table,) = comparison_tables(tree)
    assert {row[0] for row in table[1:]} >= {"edge_kernel_latency_percentile_seconds"}
    assert all(row[-1] in VERDICTS for row in table[1:])
    sources = {img.attrs["src"] for img in tree.find_all("img")}
    for kernel in ("silu", "gemm_vec4"):
        png = tmp_path / "e2" / "report" / "compare" / f"edge_{kernel}.png"
        assert png.stat().st_size > 5_000 and data_uri(png) in sources


# --- the headline cell on its own --------------------------------------------------------------------
def record_with(headline: list[HeadlineFigure], summary: dict[str, object], error: str | None = None) -> ResultRecord:
    now = datetime.now(UTC)
    return ResultRecord(
        run_id="r", benchmark="edge", host="h", device="d", backend="vulkan", status="failed" if error else "ok",
        error=error, headline=headline, summary=summary, start=now, end=now, duration_s=0, git_revision="g",
        packages={},
    )  # fmt: skip


def test_many_edge_figures_show_gemm_ratios_and_the_slowest_kernels_then_a_count() -> None:
    latency = "fleetbench_edge_kernel_latency_percentile_seconds"
    figures = [
        HeadlineFigure(metric=latency, labels={"kernel": f"k{i}", "percentile": "p50"}, value=i * 1e-3)
        for i in range(1, 21)
    ]
    figures += [
        HeadlineFigure(metric="fleetbench_edge_gemm_peak_ratio", labels={"kernel": f"gemm{i}"}, value=0.1 * i)
        for i in range(1, 3)
    ]
    shown, more = pick_figures("edge", figures)
    assert [f.labels["kernel"] for f in shown] == ["gemm1", "gemm2", "k20", "k19", "k18", "k17"]
    assert more == 16
    assert "+16 more" in headline_cell(record_with(figures, {}))


def test_the_cell_escapes_text_and_falls_back_to_summary_keys() -> None:
    cell = headline_cell(record_with([], {"kernel": "<script>x</script>", "nested": {"a": 1}}, error="a < b"))
    assert "<script>" not in cell and "&lt;script&gt;" in cell and "a &lt; b" in cell
    tree = TreeBuilder()
    tree.feed(cell)
    items = [li.text() for li in tree.root.find_all("li")]
    assert items == ["kernel <script>x</script>"]  # scalars only; the nested dict is in the full summary
    assert json.loads(tree.root.find_all("pre")[0].text())["nested"] == {"a": 1}


def test_a_report_without_compare_rejects_compare_options(root: Path) -> None:
    code, _, err = report(root, "p1", "--allow-mismatch")
    assert code == 2 and "--compare BASE" in err and not (root / "p1" / "report").exists()


def test_mfu_divides_by_one_peak_per_machine_and_another_peak_is_not_judged(root: Path, tmp_path: Path) -> None:
    first, second = (read_records(root / run_id)[0] for run_id in ("t1", "t2"))
    assert first.summary["peak_source"].startswith("measured") and second.summary["peak_source"].startswith(
        "calibrated"
    )
    assert first.summary["peak_flop_per_second"] == second.summary["peak_flop_per_second"]  # one peak, stored once
    assert list((root / "calibration").glob("cpu-peak-*.json"))
    other = tmp_path / "t2-other-peak"
    other.mkdir()
    moved = [
        r.model_copy(update={"summary": {**r.summary, "peak_flop_per_second": r.summary["peak_flop_per_second"] * 1.1}})
        for r in read_records(root / "t2")
    ]
    (other / RECORDS_FILE).write_text("".join(r.model_dump_json() + "\n" for r in moved))
    result = run_cli("compare", "--results-dir", str(root), "t1", str(other), "--format", "json")
    report = json.loads(result.stdout)
    rows = {r["metric"]: r for r in report["rows"]}
    assert rows["fleetbench_train_mfu_ratio"]["verdict"] == "not judged"
    assert "MFU peaks differ" in rows["fleetbench_train_mfu_ratio"]["excluded"]
    assert rows["fleetbench_train_device_tokens_per_second"]["verdict"] != "not judged"
    assert any("tokens/s is" in n for n in report["comparisons"][0]["benchmarks"][0]["notes"])
