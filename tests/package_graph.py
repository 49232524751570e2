"""The fleetbench package as its source says: its modules, what each imports (AST, any depth), its jobs."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "benchmarks" / "fleetbench"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The module of ours that `name` (a module, or a name inside one) is."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_in(source: str, module: str, is_package: bool) -> set[str]:
    """Every module of ours that `source` imports, at any depth (inside functions and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {hit for name in targets if name.startswith("fleetbench") and (hit := resolve(name))}
    found.discard(module)
    return found


@cache
def graph() -> dict[str, frozenset[str]]:
    return {
        name: frozenset(imports_in(path.read_text(encoding="utf-8"), name, path.name == "__init__.py"))
        for name, path in modules().items()
    }


def job_modules() -> set[str]:
    return {
        name
        for name, path in modules().items()
        if any(
            isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "JOB"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
    }
