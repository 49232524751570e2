"""The package's layer order, from its imports (AST, function-level imports included).

Data flows one way (docs: design notes): the ground floor imports nothing of ours, each layer imports
only layers below it, the CLI sits on top. Inside every folder the files and subfolders import each
other without circles, and a job module (one defining `JOB`) is imported only by the CLI, the demo or
another job: libraries never reach up into the jobs that use them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from package_graph import graph, imports_in, job_modules, modules

# The top-level modules and folders of fleetbench, lowest layer first. Within a layer, units do not
# import each other. A new top-level module or folder must be placed here (a test says so).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "catalogue", "envvars", "errors", "jsonio"),  # the ground floor: nothing of ours
    ("names",),  # the rule every name and path argument is checked by
    ("devices", "energy", "fsutil", "gpus", "logs", "runinfo", "urls"),  # small helpers; energy meters; the GPU table
    ("results", "services"),  # result records; local Prometheus/Pushgateway services
    ("config",),  # the validated configuration of every job
    ("job", "slurm"),  # the Job contract and run context; Slurm's queue and accounting
    ("dashboards", "progress", "telemetry"),  # metrics out: dashboards, progress, Pushgateway and spool
    ("compare", "probe"),  # comparisons of records; the device probe job
    ("train",),  # the FSDP2 trainer
    ("collectives", "edge", "report"),  # collectives (torchrun as the trainer); edge runners; the offline report
    ("profile",),  # torch.profiler, Nsight Compute, roofline (profiles the trainer and edge code)
    ("demo", "images"),  # the demo chains the jobs; container images of the jobs
    ("deploy",),  # Ansible and clusters, with the images
    ("cli",),  # the one command
    ("__main__",),
)
JOB_CALLERS = ("fleetbench.cli", "fleetbench.demo")  # besides other jobs, who may import a job module


def unit_of(module: str, folder: str) -> str:
    """The direct child of `folder` (a file or subfolder) that holds `module`."""
    return f"{folder}.{module[len(folder) + 1 :].split('.')[0]}"


def within(module: str, folder: str) -> bool:
    return module.startswith(folder + ".")


def reachable(edges: Mapping[str, Iterable[str]], start: str) -> set[str]:
    """Every node a path of one or more arrows leads to from `start`."""
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The groups of nodes that reach each other (strongly connected, more than one node), each sorted."""
    reach = {node: reachable(edges, node) for node in edges}
    groups = {frozenset({node} | {other for other in reach[node] if node in reach.get(other, ())}) for node in edges}
    return sorted(sorted(group) for group in groups if len(group) > 1)


def folder_circles(folder: str, edges: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """The imports that make circles among the files and subfolders of `folder`, as `a -> b` lines."""
    edges = graph() if edges is None else edges
    units: dict[str, set[str]] = {}
    for module, targets in edges.items():
        if within(module, folder):
            source = unit_of(module, folder)
            units.setdefault(source, set()).update(
                unit_of(t, folder) for t in targets if within(t, folder) and unit_of(t, folder) != source
            )
    members = {unit for group in circles(units) for unit in group}
    return sorted(
        f"{module} -> {target}"
        for module, targets in edges.items()
        if within(module, folder) and unit_of(module, folder) in members
        for target in targets
        if within(target, folder)
        and unit_of(target, folder) in members
        and unit_of(target, folder) != unit_of(module, folder)
    )


def top_unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of() -> dict[str, int]:
    return {unit: number for number, layer in enumerate(LAYERS) for unit in layer}


def test_every_top_level_module_and_folder_has_a_layer() -> None:
    units = {top_unit(module) for module in modules()}
    placed = layer_of()
    assert sorted(units - set(placed)) == [], "place each new module or folder in LAYERS"
    assert sorted(set(placed) - units) == [], "LAYERS names a module or folder that is gone"
    assert len(placed) == sum(len(layer) for layer in LAYERS), "a unit is in two layers"


def upward_arrows(layers: dict[str, int], edges: dict[str, frozenset[str]]) -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module, targets in edges.items()
        for target in targets
        if top_unit(module) != top_unit(target) and layers[top_unit(target)] >= layers[top_unit(module)]
    )


def test_no_import_goes_up_or_sideways_between_layers() -> None:
    assert upward_arrows(layer_of(), graph()) == []


def test_the_layer_check_catches_an_upward_arrow() -> None:
    """A planted import of the CLI from the catalogue, and one between two units of one layer, are caught."""
    planted = dict(graph())
    planted["fleetbench.catalogue"] = planted["fleetbench.catalogue"] | {"fleetbench.cli.main"}
    planted["fleetbench.compare"] = planted["fleetbench.compare"] | {"fleetbench.probe"}
    assert upward_arrows(layer_of(), planted) == [
        "fleetbench.catalogue -> fleetbench.cli.main",
        "fleetbench.compare -> fleetbench.probe",
    ]


def test_the_ground_floor_imports_nothing_of_ours() -> None:
    ground = set(LAYERS[0])
    assert sorted(f"{m} -> {t}" for m, ts in graph().items() if top_unit(m) in ground for t in ts) == []


def test_function_level_and_relative_imports_are_read() -> None:
    source = "def f():\n    from fleetbench.cli import main\n    from . import catalogue\n"
    assert imports_in(source, "fleetbench.jsonio", False) == {"fleetbench.cli.main", "fleetbench.catalogue"}


def test_no_module_circles() -> None:
    edges = {module: set(targets) for module, targets in graph().items()}
    assert circles(edges) == []


def test_the_circle_finder_finds_a_planted_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


FOLDERS = sorted(name for name, path in modules().items() if path.name == "__init__.py")


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_circles_between_the_files_and_folders_of(folder: str) -> None:
    assert folder_circles(folder) == []


def test_a_circle_between_folders_is_caught() -> None:
    """A file that imports a folder which imports the file back is a circle of that folder's children,
    named by its arrows; arrows that make no circle are left out."""
    planted = {
        "fleetbench.x.summary": {"fleetbench.x.trace.load"},
        "fleetbench.x.trace.load": set(),
        "fleetbench.x.trace.report": {"fleetbench.x.summary"},
        "fleetbench.x.export": {"fleetbench.x.summary"},
    }
    assert folder_circles("fleetbench.x", planted) == [
        "fleetbench.x.summary -> fleetbench.x.trace.load",
        "fleetbench.x.trace.report -> fleetbench.x.summary",
    ]
    assert folder_circles("fleetbench.x.trace", planted) == []


def test_job_modules_are_imported_only_by_the_cli_the_demo_or_another_job() -> None:
    jobs = job_modules()
    assert jobs, "no module defines JOB"
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in graph().items()
        for target in targets & jobs
        if module not in jobs and not any(module == c or within(module, c) for c in JOB_CALLERS)
    )
    assert offenders == []
