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
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["ncu-csv", "ncu-rep", "torch-trace"]
    assert (data / "README.md").is_file()
