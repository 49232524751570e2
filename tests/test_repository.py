"""The repository stands alone: nothing in it reads a folder beside the checkout."""

from __future__ import annotations

import subprocess

from conftest import REPO
from testdata import OWN_DATA_DIR

# The folder beside the checkout that holds third-party test data; written in two parts so this
# file does not match its own search.
SIBLING = "../" + "shared"
FIXTURES_FOLDER = "shared" + "/fixtures"
FIXTURES_PATH_PARTS = '"shared" / ' + '"fixtures"'
# The places allowed to know that folder: the tests' data helper (and its own test), and CI, which
# hands it to the clone it tests in an empty folder.
MAY_NAME_THE_DATA_FOLDER = {"tests/testdata.py", "tests/test_testdata.py", ".ci/run"}
CODE_SUFFIXES = (".py", ".sh", ".toml", ".yml", ".yaml", ".cfg", ".json", ".j2", ".sbatch")


def tracked_text_files() -> list[str]:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.splitlines() if not name.startswith("tests/data/")]


def is_code(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return name.endswith(CODE_SUFFIXES) or base in {"Makefile", "Dockerfile", "run"}


def test_no_code_reads_a_folder_beside_the_checkout() -> None:
    offenders = []
    for name in tracked_text_files():
        path = REPO / name
        if not path.is_file() or not is_code(name) or name in MAY_NAME_THE_DATA_FOLDER:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary files carry no paths we read
        if SIBLING in text or FIXTURES_FOLDER in text or FIXTURES_PATH_PARTS in text:
            offenders.append(name)
    assert offenders == []


def test_the_repository_carries_only_the_projects_own_test_data() -> None:
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "tests/data"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(listed) == [
        "tests/data/README.md",
        "tests/data/fsdp2-cpu/capture.py",
        "tests/data/fsdp2-cpu/rank-0.fsdp2.pt.trace.json.gz",
        "tests/data/fsdp2-cpu/rank-1.fsdp2.pt.trace.json.gz",
        # written here in the tools' layouts, no capture of a real node (its README says so)
        "tests/data/preflight/README.md",
        "tests/data/preflight/dcgmi-diag.txt",
        "tests/data/preflight/dmesg.txt",
        "tests/data/preflight/ibstat.txt",
        "tests/data/preflight/nvidia-smi-q-x.xml",
    ]
    assert OWN_DATA_DIR.is_relative_to(REPO)


def readme_layout() -> list[str]:
    """The lines of the layout block in docs/architecture.md (the fenced block after the layout marker)."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
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
