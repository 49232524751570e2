"""The device's thermal state before and after each measurement, and a cooldown that waits for it.

Sources (`edge.thermal_sources`): Linux thermal zones and cooling devices (`/sys/class/thermal`),
hwmon sensors (`/sys/class/hwmon`), both read under a root folder (`edge.thermal_root`, `/`) so a
test can point them at a tree it built; and the tools `nvidia-smi`, `adb` (an attached Android
device's `dumpsys thermalservice`), `pmset -g therm` and `powermetrics` (macOS; the latter as root only)
and `tegrastats` (Jetson), found on PATH.
A source that is absent or fails is named with the reason in the state, never filled in.

Readings take milliseconds (sysfs) to a few hundred (adb); they are taken outside the timed tries.
"""

from __future__ import annotations

import logging
import os
import re
import select
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetbench.edge.thermal_parse import (
    Sensor,
    ThermalParseError,
    Throttle,
    parse_dumpsys_thermalservice,
    parse_nvidia_smi_csv,
    parse_pmset_therm,
    parse_powermetrics,
    parse_tegrastats,
    plausible,
)

__all__ = [
    "SOURCES",
    "Cooldown",
    "CooldownRule",
    "ThermalState",
    "clock_drops",
    "cool_down",
    "read_hwmon",
    "read_state",
    "read_thermal_class",
    "throttling_between",
]

SOURCES = ("thermal_zone", "hwmon", "nvidia-smi", "adb", "pmset", "powermetrics", "tegrastats")
TOOL_TIMEOUT_S = 10.0
STREAM_TIMEOUT_S = 5.0  # a streaming tool (tegrastats) that prints no line within this is "no reading"
ATTRIBUTE_BYTES = 4096  # a sysfs attribute is one page at most
MAX_STATE_DIGITS = 18  # a cooling state longer than this is not a state (and int() of 5,000 digits raises)
# Cooling devices by type (`cooling_deviceN/type`): the passive ones slow compute down when in force
# (cpufreq/devfreq/gpufreq clamps, idle injection, the ACPI processor and Intel's TCC and powerclamp);
# fans cool without slowing anything; the rest (backlight, battery charging, radios) are reported only.
PASSIVE_COOLING = re.compile(
    r"cpufreq|devfreq|gpufreq|gpu|processor|powerclamp|idle|pause|tcc|cpu|cluster|cdsp|npu", re.IGNORECASE
)
FAN_COOLING = re.compile(r"fan", re.IGNORECASE)
NVIDIA_SMI_QUERY = "index,name,temperature.gpu,clocks_throttle_reasons.active,clocks.sm,utilization.gpu"
# A clock this far under the highest the same clock read right after an earlier measurement of the run
# is a slowdown, whatever the reason registers say (vkpeak and the farms compare clocks the same way).
CLOCK_DROP = 0.05
CLOCK_SUFFIX = "_clock_mhz"

log = logging.getLogger(__name__)


@dataclass
class ThermalState:
    """Sensors and throttle indicators read at one moment, and the sources that gave nothing (and why)."""

    sensors: list[Sensor] = field(default_factory=list)
    throttles: list[Throttle] = field(default_factory=list)
    absent: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # readings that were there but not understood, each said

    def hottest(self, moving: Collection[str] | None = None) -> Sensor | None:
        """The hottest sensor among `moving` (sensor keys that changed over the run's readings), else,
        where none moved or `moving` is None, the hottest of all; None without sensors. A constant
        reading (Jetson's PMIC@50C, printed at a fixed value) is no measurement of the device heating up."""
        candidates = [s for s in self.sensors if moving is not None and s.key in moving]
        return max(candidates or self.sensors, key=lambda s: s.celsius, default=None)

    def active_throttles(self) -> list[Throttle]:
        """Indicators that say the device is slowed down now."""
        return [t for t in self.throttles if t.active]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: sensors, throttle indicators, absent sources, the hottest sensor."""
        hottest = self.hottest()
        return {
            "max_celsius": hottest.celsius if hottest else None,
            "hottest": hottest.key if hottest else None,
            "sensors": [vars(s) for s in self.sensors],
            "throttles": [vars(t) for t in self.throttles],
            "absent": dict(self.absent),
            "notes": list(self.notes),
        }


def _read_text(path: Path) -> str | None:
    """A sysfs attribute's text; None where the kernel refuses it (EIO, ENODATA: a sensor that is off) or
    where it is no regular file: opened non-blocking and checked first, so a FIFO (or a device node)
    under the root cannot hang the run."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, ATTRIBUTE_BYTES).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _millidegrees(path: Path) -> float | None:
    text = _read_text(path)
    if text is None or len(text) > MAX_STATE_DIGITS:
        return None
    try:
        return int(text) / 1000.0
    except ValueError:
        return None


def _cooling_device(device: Path, notes: list[str]) -> Throttle | None:
    """One cooling device: a passive one (by its type) above state 0 is a throttle step in force; a fan is
    reported as a fan; a state that is no number, or past its own maximum, is said in `notes`."""
    state, top = _read_text(device / "cur_state"), _read_text(device / "max_state")
    kind = _read_text(device / "type") or "unknown"
    if state is None:
        return None
    if not state.isdigit() or len(state) > MAX_STATE_DIGITS:
        notes.append(f"{device.name} ({kind}): cur_state {state[:20]!r} is no cooling state; ignored")
        return None
    level = int(state)
    limit = int(top) if top is not None and top.isdigit() and len(top) <= MAX_STATE_DIGITS else None
    if limit is not None and level > limit:
        notes.append(f"{device.name} ({kind}): cur_state {level} is past its max_state {limit}; ignored")
        return None
    detail = f"{kind} state {state} of {top}" if top else f"{kind} state {state}"
    if FAN_COOLING.search(kind):
        return Throttle("thermal_zone", device.name, state, False, f"fan: {detail}", "fan")
    if PASSIVE_COOLING.search(kind):
        return Throttle("thermal_zone", device.name, state, level > 0, detail)
    return Throttle("thermal_zone", device.name, state, False, f"{detail} (does not slow compute)", "other")


def read_thermal_class(root: Path, notes: list[str] | None = None) -> tuple[list[Sensor], list[Throttle], str | None]:
    """Thermal zones (`thermal_zoneN/type`, `temp` in millidegrees) and cooling devices (`_cooling_device`)
    under `root`; readings that are there but impossible go to `notes`.

    The third value is why there are none, or None.
    """
    notes = [] if notes is None else notes
    base = root / "sys" / "class" / "thermal"
    if not base.is_dir():
        return [], [], f"{base} does not exist"
    sensors = []
    for zone in sorted(base.glob("thermal_zone*")):
        celsius = _millidegrees(zone / "temp")
        kind = _read_text(zone / "type") or "unknown"
        if celsius is not None and not plausible(celsius):
            notes.append(f"{zone.name} ({kind}): {celsius:g} C is no temperature; ignored")
        elif celsius is not None:
            sensors.append(Sensor("thermal_zone", zone.name, kind, celsius))
    throttles = []
    for device in sorted(base.glob("cooling_device*")):
        throttle = _cooling_device(device, notes)
        if throttle is not None:
            throttles.append(throttle)
    if not sensors and not throttles:
        return [], [], f"no readable thermal_zone* or cooling_device* in {base}"
    return sensors, throttles, None


def read_hwmon(root: Path) -> tuple[list[Sensor], str | None]:
    """hwmon chips (`hwmonN/name`) and their `tempK_input` (millidegrees) with `tempK_label` under `root`."""
    base = root / "sys" / "class" / "hwmon"
    if not base.is_dir():
        return [], f"{base} does not exist"
    sensors = []
    for chip in sorted(base.glob("hwmon*")):
        chip_name = _read_text(chip / "name") or chip.name
        for probe in sorted(chip.glob("temp*_input")):
            celsius = _millidegrees(probe)
            if celsius is None:
                continue
            label = _read_text(probe.with_name(probe.name.replace("_input", "_label")))
            channel = probe.name.removesuffix("_input")
            name = f"{chip.name} {chip_name} {label or channel}"
            sensors.append(Sensor("hwmon", name, chip_name, celsius))
    if not sensors:
        return [], f"no readable temp*_input in {base}"
    return sensors, None


def _run_tool(argv: list[str]) -> tuple[str | None, str | None]:
    """The tool's stdout, or None with the reason (not on PATH, failed, timed out)."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not on PATH"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, errors="replace")
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} did not answer within {TOOL_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, f"{argv[0]} could not run: {exc.strerror}"
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[0]
        return None, f"{' '.join(argv)} failed: {first}"
    return done.stdout, None


def _first_line_of(argv: list[str], timeout_s: float | None = None) -> tuple[str | None, str | None]:
    """The first line a streaming tool (tegrastats) prints within `timeout_s` (STREAM_TIMEOUT_S), then
    stop it; a tool that stays silent is "no reading", said, instead of a run that hangs."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not on PATH"
    limit = STREAM_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit
    chunks: list[bytes] = []
    try:
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
            try:
                assert proc.stdout is not None
                fd = proc.stdout.fileno()
                while b"\n" not in b"".join(chunks) and sum(map(len, chunks)) < 1 << 16:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([fd], [], [], left)[0]:
                        break
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break  # the tool exited
                    chunks.append(chunk)
            finally:
                proc.kill()
    except OSError as exc:
        return None, f"{argv[0]} could not run: {exc.strerror}"
    line = b"".join(chunks).decode("utf-8", errors="replace").split("\n", 1)[0]
    if line.strip():
        return line, None
    return None, f"{argv[0]} printed no line within {limit:g} s: no reading"


Parser = Callable[[str], tuple[list[Sensor], list[Throttle]]]
TOOLS: dict[str, tuple[list[str], Parser, bool]] = {
    "nvidia-smi": (["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv"], parse_nvidia_smi_csv, False),
    "adb": (["adb", "shell", "dumpsys", "thermalservice"], parse_dumpsys_thermalservice, False),
    "pmset": (["pmset", "-g", "therm"], parse_pmset_therm, False),
    # one sample of 100 ms; without root it refuses ("must be invoked as the superuser"): absent, with that
    "powermetrics": (
        ["powermetrics", "--samplers", "thermal,cpu_power,gpu_power", "-n", "1", "-i", "100"],
        parse_powermetrics,
        False,
    ),
    "tegrastats": (["tegrastats", "--interval", "100"], parse_tegrastats, True),
}


def _read_tool(source: str, state: ThermalState) -> None:
    argv, parse, streams = TOOLS[source]
    text, why = _first_line_of(argv) if streams else _run_tool(argv)
    if text is None:
        state.absent[source] = why or "no output"
        return
    try:
        sensors, throttles = parse(text)
    except ThermalParseError as exc:
        state.absent[source] = f"{argv[0]} output not understood: {exc}"
        return
    state.sensors.extend(sensors)
    state.throttles.extend(throttles)


def read_state(sources: tuple[str, ...] | list[str], root: Path = Path("/")) -> ThermalState:
    """One reading of every source asked for; absent ones are named in `absent`."""
    state = ThermalState()
    for source in sources:
        if source == "thermal_zone":
            sensors, throttles, why = read_thermal_class(root, state.notes)
            state.sensors.extend(sensors)
            state.throttles.extend(throttles)
        elif source == "hwmon":
            sensors, why = read_hwmon(root)
            state.sensors.extend(sensors)
        else:
            _read_tool(source, state)
            continue
        if why is not None:
            state.absent[source] = why
    return state


def throttling_between(before: ThermalState, after: ThermalState) -> list[str]:
    """What says the device was slowed down around a measurement: each indicator active before or after."""
    seen: dict[str, str] = {}
    for when, state in (("before", before), ("after", after)):
        for t in state.active_throttles():
            seen.setdefault(t.key, f"{t.key}={t.value} ({t.detail}, {when})")
    return list(seen.values())


def _idle(state: ThermalState, clock: Throttle) -> bool:
    """Whether the clock's own device said it was idle in this reading (NVML's gpu_idle reason, or 0 %
    busy): an idle GPU clocks down by design."""
    owner = clock.name[: -len(CLOCK_SUFFIX)].rsplit(" ", 1)[0]
    for t in state.throttles:
        if t.source != clock.source:
            continue
        try:
            if t.name == f"{owner} clocks_event_reasons" and int(t.value, 16) & 0x1:
                return True
            if t.name == f"{owner} utilization_pct" and float(t.value) == 0:
                return True
        except ValueError:
            continue
    return False


def clock_drops(after: ThermalState, peaks: dict[str, float]) -> list[str]:
    """The clocks of `after` more than CLOCK_DROP under the highest of the same clock in `peaks` (read right
    after earlier measurements of the run), unless the device said it was idle; `peaks` is updated."""
    drops: list[str] = []
    for clock in after.throttles:
        if not clock.name.endswith(CLOCK_SUFFIX):
            continue
        try:
            mhz = float(clock.value)
        except ValueError:
            continue
        peak = peaks.get(clock.key)
        if peak is not None and mhz < peak * (1 - CLOCK_DROP) and not _idle(after, clock):
            drops.append(
                f"{clock.key} fell to {mhz:g} MHz from {peak:g} MHz earlier in the run "
                f"({(mhz / peak - 1) * 100:.0f} %, clock drop)"
            )
        peaks[clock.key] = max(peak or 0.0, mhz)
    return drops


@dataclass
class Cooldown:
    """How a cooldown went: the time waited, whether it was temperature-driven, the absolute target it
    waited for and where that came from, and a warning on timeout."""

    waited_s: float
    driven_by: str  # "temperature", or "fixed" where no sensor was there to wait on
    warning: str | None = None
    target_c: float | None = None
    target_from: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "waited_s": self.waited_s,
            "driven_by": self.driven_by,
            "warning": self.warning,
            "target_c": self.target_c,
            "target_from": self.target_from,
        }


@dataclass(frozen=True)
class CooldownRule:
    """The cooldown settings: at least `min_s`; then until the hottest moving sensor is at or under an
    absolute target (`target_c`, else the idle reading plus `margin_c`), polling, up to `timeout_s`."""

    min_s: float
    margin_c: float
    timeout_s: float
    poll_s: float
    target_c: float | None = None


def cooldown_target(baseline: ThermalState, rule: CooldownRule, moving: Collection[str] | None) -> tuple[float, str]:
    """The absolute temperature a cooldown waits for and where it came from: the configured target, else
    the idle reading (the baseline's hottest moving sensor) plus the margin."""
    if rule.target_c is not None:
        return rule.target_c, "configured (edge.cooldown_target_c)"
    idle = baseline.hottest(moving)
    assert idle is not None  # cool_down checks for sensors first
    return idle.celsius + rule.margin_c, f"idle reading {idle.celsius:.1f} C of {idle.key} + {rule.margin_c:g} C"


def cool_down(
    baseline: ThermalState,
    read: Callable[[], ThermalState],
    rule: CooldownRule,
    sleep: Callable[[float], None] = time.sleep,
    moving: Collection[str] | None = None,
) -> Cooldown:
    """Idle at least `rule.min_s`, then until the hottest sensor that moves (`moving`: keys that changed
    over the run; all where None) is at or under the absolute target (`cooldown_target`), or
    `rule.timeout_s` has passed: the warning then says so, with the sensor, its reading and the target.
    Without baseline sensors the cooldown is the fixed `min_s` and says so."""
    start = time.monotonic()
    if rule.min_s > 0:
        sleep(rule.min_s)
    if not baseline.sensors:
        return Cooldown(time.monotonic() - start, "fixed")
    target, origin = cooldown_target(baseline, rule, moving)
    while True:
        hot = read().hottest(moving)
        waited = time.monotonic() - start
        if hot is None or hot.celsius <= target:
            return Cooldown(waited, "temperature", None, target, origin)
        if waited >= rule.timeout_s:
            warning = (
                f"cooldown timed out after {waited:.1f} s: {hot.key} at {hot.celsius:.1f} C, above the target "
                f"{target:.1f} C ({origin})"
            )
            return Cooldown(waited, "temperature", warning, target, origin)
        sleep(min(rule.poll_s, max(rule.timeout_s - waited, 0.0)))
