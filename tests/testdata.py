"""Where the tests' input files live: the project's own captures, and other people's published data.

- `tests/data/` holds what this project made itself (the `fsdp2-cpu/` capture and its script).
- Third-party files (Nsight Compute reports, `ncu` exports and console logs, PyTorch traces, device
  telemetry that other people published) are not shipped with the repository. `get_test_data_dir()`
  finds them at `$FLEETBENCH_TEST_DATA`, else in `../shared/fixtures` next to the checkout; each is
  listed with its public source in `tests/third-party-data.tsv` (`scripts/test_data.py` fetches them).
  A test that reads one is marked `realdata` and skips, saying where it looked, when the folder is absent.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fleetbench.envvars import TEST_DATA_ENV

REPO = Path(__file__).resolve().parents[1]
OWN_DATA_DIR = REPO / "tests" / "data"
MANIFEST = REPO / "tests" / "third-party-data.tsv"
ENV_VAR = TEST_DATA_ENV
# Where CI and every developer machine keep the third-party files: a folder beside the checkout.
BESIDE_CHECKOUT = REPO.parent / "shared" / "fixtures"


@dataclass(frozen=True)
class ThirdPartyFile:
    """One published file a test reads: where it sits in the data folder and where it came from."""

    file: str
    repository: str
    commit: str
    source_path: str
    blob: str
    licence: str


def get_test_data_dir() -> Path:
    """The folder of third-party test data: `$FLEETBENCH_TEST_DATA` when set, else `../shared/fixtures`."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return Path(configured).expanduser().resolve() if configured else BESIDE_CHECKOUT


def missing_reason() -> str | None:
    """None when the third-party data is there; else one line: where it looked, how to provide it."""
    folder = get_test_data_dir()
    if folder.is_dir() and any(folder.iterdir()):
        return None
    where = f"${ENV_VAR}={folder}" if os.environ.get(ENV_VAR, "").strip() else f"{folder} (${ENV_VAR} unset)"
    return (
        f"third-party test data not found at {where}: fetch it with `.venv/bin/python scripts/test_data.py DIR` "
        f"and set {ENV_VAR}=DIR (sources in tests/third-party-data.tsv)"
    )


@cache
def manifest() -> tuple[ThirdPartyFile, ...]:
    """Every third-party file the tests may read, with its repository, commit, path and git blob id."""
    with MANIFEST.open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t")
        return tuple(ThirdPartyFile(**row) for row in rows)


def listed(folder: str, suffix: str = "") -> list[Path]:
    """The manifest's files in one folder of the data (e.g. "ncu-csv", ".csv"), as paths in the data folder.

    Taken from the manifest, not from the disk, so a parametrised test has the same cases where the
    data is absent (each then skips with the reason) as where it is there.
    """
    base = get_test_data_dir()
    return sorted(
        base / entry.file for entry in manifest() if entry.file.startswith(f"{folder}/") and entry.file.endswith(suffix)
    )
