"""RAPL through Linux's powercap: /sys/class/powercap/intel-rapl:N/energy_uj, one counter per CPU package.

The counters are microjoules since some moment and wrap at `max_energy_range_uj`; AMD's Zen packages
appear under the same `intel-rapl` names. Sub-zones (intel-rapl:N:M: core, uncore, dram) are parts of
their package and are not added again. Since Linux 5.10 energy_uj is readable by root only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
PACKAGE = re.compile(r"^intel-rapl:\d+$")


@dataclass(frozen=True)
class Zone:
    """One package counter at one moment."""

    name: str  # the zone's `name` file, e.g. package-0
    energy_uj: int
    max_energy_range_uj: int


def read_zones(root: Path = POWERCAP) -> tuple[list[Zone], str | None]:
    """Every package zone's counter now; ([], why) when none can be read."""
    if not root.is_dir():
        return [], f"no powercap folder at {root} (no RAPL driver, or not Linux)"
    folders = sorted(p for p in root.iterdir() if PACKAGE.match(p.name))
    if not folders:
        return [], f"no intel-rapl package zone under {root}"
    zones, problems = [], []
    for folder in folders:
        try:
            name = (folder / "name").read_text(encoding="utf-8").strip() or folder.name
            energy = int((folder / "energy_uj").read_text(encoding="utf-8").strip())
            largest = int((folder / "max_energy_range_uj").read_text(encoding="utf-8").strip())
        except PermissionError:
            problems.append(f"{folder / 'energy_uj'} is not readable by this user (root only since Linux 5.10)")
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"{folder}: {exc}")
            continue
        zones.append(Zone(name, energy, largest))
    if not zones:
        return [], "; ".join(problems)
    return zones, None


def joules_between(before: list[Zone], after: list[Zone]) -> float:
    """Energy of every package between two readings, each counter unwrapped once at its range."""
    total_uj = 0
    start = {zone.name: zone for zone in before}
    for zone in after:
        first = start.get(zone.name)
        if first is None:
            continue
        delta = zone.energy_uj - first.energy_uj
        if delta < 0:  # the counter wrapped past max_energy_range_uj
            delta += zone.max_energy_range_uj + 1
        total_uj += delta
    return total_uj / 1e6
