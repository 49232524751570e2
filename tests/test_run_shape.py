"""Every job has one shape: one run factory, a typed headline declared in the catalogue, one entry."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from fleetbench.catalogue import CATALOGUE, HEADLINES
from fleetbench.config.schema import FleetbenchConfig, RunConfig
from fleetbench.job import RunContext
from fleetbench.results.record import HeadlineFigure
from fleetbench.results.store import read_records
from fleetbench.runinfo import RUN_ID_PATTERN
from fleetbench.telemetry.session import open_run
from package_graph import PACKAGE, job_modules

# Each job's entry, `JOB`: `(config, context) -> JobResult` (fleetbench/job.py), typed by mypy as a Job;
# the modules are found by scanning the package for a module-level `JOB: ...` declaration.
JOB_MODULES = sorted(job_modules())


def test_the_jobs_are_found() -> None:
    """The scan finds the jobs of every job package (and a `JOB` that is only a name, not a Job, is no job)."""
    assert {module.split(".")[1] for module in JOB_MODULES} == {"collectives", "edge", "probe", "profile", "train"}
    assert "fleetbench.edge.llm.job" in JOB_MODULES
    assert "fleetbench.telemetry.push" not in JOB_MODULES  # its JOB is the Pushgateway's job label


@pytest.mark.parametrize("module", JOB_MODULES)
def test_every_job_has_the_same_entry(module: str) -> None:
    entry = importlib.import_module(module).JOB
    signature = inspect.signature(entry)
    assert list(signature.parameters) == ["config", "context"]
    assert str(signature.return_annotation).startswith("JobResult[")


def test_the_jobs_that_take_their_input_are_made_as_jobs(tmp_path: Path) -> None:
    from fleetbench.profile.jobs.ncu import summary_job
    from fleetbench.profile.jobs.trace import TraceSettings, record_job

    for job in (
        summary_job(tmp_path / "report.ncu-rep"),
        record_job(None, TraceSettings(paths=[], window="steps", top=1)),
    ):  # type: ignore[arg-type]
        assert list(inspect.signature(job).parameters) == ["config", "context"]


def test_only_the_cli_and_the_progress_module_hold_a_console() -> None:
    """Jobs return values and report progress to `Progress`; drawing on a rich Console is the CLI's."""
    import ast

    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "cli" or relative == Path("progress.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in ("rich.console", "rich.live", "rich.progress"):
                offenders.append(f"{relative}: from {node.module} import ...")
            if isinstance(node, ast.arg) and (
                node.arg == "console" or "Console" in ast.unparse(node.annotation or ast.Constant(""))
            ):
                offenders.append(f"{relative}: parameter {node.arg}")
    assert offenders == []


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
    with open_run(config, RunContext.start(config), "probe", config.probe, "cpu-model", "cpu") as bench:
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


def test_the_run_context_names_a_run_once_when_the_config_does_not(tmp_path: Path) -> None:
    unnamed = config_in(tmp_path)
    first, second = RunContext.start(unnamed), RunContext.start(unnamed)
    assert RUN_ID_PATTERN.fullmatch(first.run_id) and first.run_id != second.run_id
    named = RunContext.start(config_in(tmp_path, "agreed"))
    assert (named.run_id, named.run_dir) == ("agreed", tmp_path / "agreed")
    for context in (first, named):  # every run a job opens in a context is that context's run
        with open_run(unnamed, context, "probe", unnamed.probe, "d", "cpu") as bench:
            pass
        assert bench.result().run_id == context.run_id and (context.run_dir / "records.jsonl").is_file()


def test_pinned_hands_the_run_to_a_child_process_config(tmp_path: Path) -> None:
    context = RunContext.start(config_in(tmp_path))
    pinned = context.pinned(config_in(tmp_path / "elsewhere"))
    assert (pinned.run.run_id, pinned.run.results_dir) == (context.run_id, tmp_path)


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
    with (
        open_run(config, RunContext.start(config), "probe", config.probe, "d", "cpu") as bench,
        pytest.raises(ValueError, match=message),
    ):
        bench.add_headline(metric, 1.0, **labels)


def test_records_without_a_headline_still_read(tmp_path: Path) -> None:
    """Records written before the headline existed load with an empty one."""
    config = config_in(tmp_path, "shape-3")
    with open_run(config, RunContext.start(config), "probe", config.probe, "d", "cpu"):
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
        if path.relative_to(PACKAGE).parts[0] == "cli" or (path.name == "__main__.py" and path.parent == PACKAGE):
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


def test_every_job_entry_is_declared_as_a_job() -> None:
    """A module-level `JOB` is either declared `JOB: Job[...]` (so the scan above finds it) or a plain text
    label (the Pushgateway's job name); an undeclared `JOB = run` would hide a job from these tests."""
    import ast

    undeclared = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "JOB" for target in node.targets)
        and not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))
    ]
    assert undeclared == []
