"""Every job has one shape: one run factory, a typed headline declared in the catalogue, one entry."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from fleetbench.catalogue import CATALOGUE, HEADLINES
from fleetbench.config.schema import FleetbenchConfig, RunConfig
from fleetbench.results.record import HeadlineFigure, ResultRecord
from fleetbench.results.store import read_records
from fleetbench.telemetry.session import open_run

# Each job's entry: `<job>/run.py: run(config, console) -> ResultRecord`.
JOB_MODULES = (
    "fleetbench.probe.run",
    "fleetbench.train.run",
    "fleetbench.profile.run",
    "fleetbench.profile.ncu.run",
    "fleetbench.profile.roofline.run",
    "fleetbench.edge.run",
)


@pytest.mark.parametrize("module", JOB_MODULES)
def test_every_job_has_the_same_entry(module: str) -> None:
    entry = importlib.import_module(module).run
    signature = inspect.signature(entry)
    assert list(signature.parameters) == ["config", "console"]
    assert signature.return_annotation in (ResultRecord, "ResultRecord")


@pytest.mark.parametrize("benchmark", sorted(HEADLINES))
def test_headline_metrics_are_catalogue_gauges_or_counters(benchmark: str) -> None:
    for name in HEADLINES[benchmark]:
        spec = CATALOGUE[name]
        assert spec.kind in ("gauge", "counter"), name
        # Shares describe where time went; everything else says which way is better.
        assert spec.better is not None or spec.unit == "ratio", name


def config_in(tmp_path: Path, run_id: str | None = None) -> FleetbenchConfig:
    return FleetbenchConfig(run=RunConfig(results_dir=tmp_path, run_id=run_id))


def test_open_run_takes_identity_folder_and_telemetry_from_the_config(tmp_path: Path) -> None:
    config = config_in(tmp_path, "shape-1")
    with open_run(config, "probe", config.probe, "cpu-model", "cpu") as bench:
        bench.add_headline("fleetbench_probe_achieved_flop_per_second", 2e9, [1e9, 2e9, 3e9], **LABELS)
        with pytest.raises(RuntimeError, match="has not finished"):
            bench.result()
    record = bench.result()
    assert (record.run_id, record.benchmark, record.device, record.backend, record.rank) == (
        "shape-1",
        "probe",
        "cpu-model",
        "cpu",
        0,
    )
    assert record.config == config.probe.model_dump(mode="json")
    assert read_records(tmp_path / "shape-1") == [record]
    figure = record.headline[0]
    assert (figure.unit, figure.better, figure.samples) == ("flop_per_second", "higher", [1e9, 2e9, 3e9])


LABELS = {"probe": "matmul", "dtype": "float32", "size": "512"}


def test_open_run_names_a_run_when_the_config_does_not(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    with open_run(config, "probe", config.probe, "d", "cpu") as first:
        pass
    with open_run(config, "probe", config.probe, "d", "cpu", run_id="agreed") as second:
        pass
    assert first.result().run_id != "agreed" and second.result().run_id == "agreed"


@pytest.mark.parametrize(
    ("metric", "labels", "message"),
    [
        ("fleetbench_train_loss", {}, "not a headline metric of probe"),
        ("fleetbench_probe_achieved_flop_per_second", {"probe": "matmul"}, "takes labels"),
    ],
)
def test_a_headline_outside_the_declaration_is_refused(
    tmp_path: Path, metric: str, labels: dict[str, str], message: str
) -> None:
    config = config_in(tmp_path, "shape-2")
    with open_run(config, "probe", config.probe, "d", "cpu") as bench, pytest.raises(ValueError, match=message):
        bench.add_headline(metric, 1.0, **labels)


def test_records_without_a_headline_still_read(tmp_path: Path) -> None:
    """Records written before the headline existed load with an empty one."""
    config = config_in(tmp_path, "shape-3")
    with open_run(config, "probe", config.probe, "d", "cpu"):
        pass
    path = tmp_path / "shape-3" / "records.jsonl"
    line = path.read_text().replace(',"headline":[]', "")
    assert '"headline"' not in line
    path.write_text(line)
    assert read_records(tmp_path / "shape-3")[0].headline == []


def test_headline_figures_compare_by_metric_and_labels() -> None:
    a = HeadlineFigure(metric="fleetbench_step_seconds", value=1.0)
    b = HeadlineFigure(metric="fleetbench_step_seconds", value=2.0, samples=[2.0])
    assert a.key() == b.key() and a.better == "lower"


PACKAGE = Path(__file__).resolve().parents[1] / "benchmarks" / "fleetbench"


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every `import x` and `from x import names` in one source file."""
    import ast

    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_the_domain_never_imports_the_cli() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "cli" or (path.name == "__main__.py" and path.parent == PACKAGE):
            continue
        offenders += [
            f"{path.relative_to(PACKAGE)}: {m}" for m, _ in imports_of(path) if m.startswith("fleetbench.cli")
        ]
    assert offenders == []


def test_no_module_imports_another_packages_private_name() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        own = package_of("fleetbench." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
        for module, names in imports_of(path):
            if module.startswith("fleetbench") and package_of(module) != own:
                offenders += [
                    f"{path.relative_to(PACKAGE)}: {module}.{n}"
                    for n in names
                    if n.startswith("_") and not n.endswith("__")
                ]
    assert offenders == []
