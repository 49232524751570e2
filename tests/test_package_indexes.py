"""Package docstrings that index their modules are held against the files: every module and subfolder is
named, and no listed name is a module that is gone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from package_graph import PACKAGE

# A listing line: `  name   what it does`, or `  a, b, c   what their names say` (a folder as `name/`).
LISTING = re.compile(r"^ {0,4}([a-z_][a-z0-9_]*/?(?:, [a-z_][a-z0-9_]*/?)*) {2,}\S", re.MULTILINE)


def children(package: Path) -> set[str]:
    """The modules (without .py) and subpackages of `package`."""
    modules = {path.stem for path in package.glob("*.py") if path.name not in ("__init__.py", "__main__.py")}
    return modules | {path.name for path in package.iterdir() if (path / "__init__.py").is_file()}


def named(doc: str, name: str) -> bool:
    """Whether the docstring names `name` as a word (`name`, `name/`, `name.py`, `pkg.name`)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", doc) is not None


def listed(doc: str) -> list[str]:
    """The names of the docstring's listing lines."""
    return [name.strip().rstrip("/") for match in LISTING.finditer(doc) for name in match.group(1).split(",")]


def is_index(doc: str, names: set[str]) -> bool:
    """A docstring indexes its package when it lists modules (two listing lines or more) or names at least
    half of them in prose."""
    return len(listed(doc)) >= 2 or (bool(names) and 2 * sum(named(doc, name) for name in names) >= len(names))


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


PACKAGES = sorted(path.parent for path in PACKAGE.rglob("__init__.py"))
INDEXES = [package for package in PACKAGES if is_index(docstring(package), children(package))]


def test_the_indexes_are_found() -> None:
    found = {str(package.relative_to(PACKAGE)) for package in INDEXES}
    assert {"train", "profile", "profile/ncu", "edge", "compare"} <= found, sorted(found)


@pytest.mark.parametrize("package", INDEXES, ids=[str(p.relative_to(PACKAGE)) for p in INDEXES])
def test_an_index_names_every_module(package: Path) -> None:
    doc = docstring(package)
    assert sorted(name for name in children(package) if not named(doc, name)) == []


@pytest.mark.parametrize("package", INDEXES, ids=[str(p.relative_to(PACKAGE)) for p in INDEXES])
def test_an_index_lists_no_module_that_is_gone(package: Path) -> None:
    assert sorted(set(listed(docstring(package))) - children(package)) == []


def test_a_stale_or_short_index_is_caught() -> None:
    """A listing that names a deleted module, or leaves a new one out, is found."""
    doc = "Modules:\n  load     read traces\n  render   the tables\n  a, b     what their names say\n"
    assert listed(doc) == ["load", "render", "a", "b"]
    assert is_index(doc, {"load", "a", "b", "new"})
    assert set(listed(doc)) - {"load", "a", "b", "new"} == {"render"}
    assert not named(doc, "new") and named(doc, "load") and not named("loads", "load")
    assert not is_index("The probe job: timed matmul and copy.", {"compute", "run"})
