"""The repository stands alone: nothing in it reads a folder beside the checkout."""

from __future__ import annotations

import subprocess

from conftest import REPO
from testdata import get_test_data_dir

# A sibling folder named like the one the fixtures came from; written in two parts so this file
# does not match its own search.
SIBLING = "../" + "shared"


def tracked_text_files() -> list[str]:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.splitlines() if not name.startswith("tests/data/")]


def test_no_file_refers_to_a_sibling_folder() -> None:
    offenders = []
    for name in tracked_text_files():
        path = REPO / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary files carry no paths we read
        if SIBLING in text:
            offenders.append(name)
    assert offenders == []


def test_test_data_is_inside_the_repository() -> None:
    data = get_test_data_dir()
    assert data.is_relative_to(REPO)
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == [
        "fsdp2-cpu",
        "hta",
        "ncu-console",
        "ncu-csv",
        "ncu-rep",
        "torch-trace",
    ]
    assert (data / "README.md").is_file()


def readme_layout() -> list[str]:
    """The lines of the README's layout block (the fenced block after the layout marker)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- layout", 1)[1].split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_layout_names_what_exists() -> None:
    for line in readme_layout():
        name = line.split()[0]
        if "*" in name:
            continue
        base = REPO / "benchmarks" if name.startswith("fleetbench/") else REPO
        assert (base / name).exists(), f"README layout names {name}, which is not in the tree"


def test_every_top_level_entry_and_package_is_in_the_readme_layout() -> None:
    lines = readme_layout()
    named = {line.split()[0].rstrip("/") for line in lines}
    tracked = {name.split("/")[0] for name in [*tracked_text_files(), "tests/data"]}
    hidden_but_shown = {".ci"}
    assert {n for n in tracked if not n.startswith(".") or n in hidden_but_shown} - named == set()
    package = REPO / "benchmarks" / "fleetbench"
    subpackages = {f"fleetbench/{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert subpackages - named == set()
    modules_line = next(line for line in lines if line.split()[0] == "fleetbench/*.py")
    modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
    assert {m for m in modules if m not in modules_line} == set()
