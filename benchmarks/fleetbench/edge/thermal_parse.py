"""Parsers of what device tools print about heat and throttling: nvidia-smi, dumpsys thermalservice,
pmset, powermetrics, tegrastats.

Each takes the tool's text as it prints it and returns sensors (degrees Celsius) and throttle
indicators. A capture that is not the tool's layout raises ThermalParseError with one line; a field a
tool leaves out (`[N/A]`) is left out, never invented.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass

__all__ = [
    "ANDROID_STATUS",
    "NVIDIA_THROTTLE_BITS",
    "Sensor",
    "ThermalParseError",
    "Throttle",
    "parse_dumpsys_thermalservice",
    "parse_nvidia_smi_csv",
    "parse_pmset_therm",
    "parse_powermetrics",
    "parse_tegrastats",
    "plausible",
]


class ThermalParseError(ValueError):
    """A capture that is not the layout its tool prints; the message is one line."""


@dataclass(frozen=True)
class Sensor:
    """One temperature: where it came from, the sensor's name and type as the source spells them."""

    source: str
    name: str
    kind: str
    celsius: float

    @property
    def key(self) -> str:
        """`source/name`: the same sensor in two readings has the same key."""
        return f"{self.source}/{self.name}"


@dataclass(frozen=True)
class Throttle:
    """One throttle indicator: its raw value, whether it says "slowed down now", and what it means."""

    source: str
    name: str
    value: str
    active: bool
    detail: str = ""
    role: str = "throttle"  # throttle (slows compute), fan (cools, slows nothing), clock, or other

    @property
    def key(self) -> str:
        """`source/name`, as for sensors."""
        return f"{self.source}/{self.name}"


# NVML's clocks event (formerly "throttle") reasons (nvml.h, nvmlClocksEventReason*). Idle, application
# clocks, sync boost and display clocks are not a slowdown that spoils a figure; the others are.
NVIDIA_THROTTLE_BITS: dict[int, tuple[str, bool]] = {
    0x1: ("gpu_idle", False),
    0x2: ("applications_clocks_setting", False),
    0x4: ("sw_power_cap", True),
    0x8: ("hw_slowdown", True),
    0x10: ("sync_boost", False),
    0x20: ("sw_thermal_slowdown", True),
    0x40: ("hw_thermal_slowdown", True),
    0x80: ("hw_power_brake_slowdown", True),
    0x100: ("display_clock_setting", False),
}
# The old and the new (driver 535+) spelling of the same field, and of the SM clock.
_REASONS_COLUMNS = ("clocks_throttle_reasons.active", "clocks_event_reasons.active")
_SM_CLOCK_COLUMNS = ("clocks.sm", "clocks.current.sm")
_UNIT = re.compile(r"\s*\[[^\]]*\]$")


def _number(text: str) -> float | None:
    """`885 MHz` -> 885.0, `37` -> 37.0; `[N/A]`, `N/A`, `[Not Supported]` -> None."""
    value = text.strip()
    if not value or value.startswith("[") or value.upper() == "N/A":
        return None
    try:
        number = float(value.split()[0])
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _reasons(value: str) -> tuple[bool, str] | None:
    """The active reasons bitmask (`0x...`) as (slowed down, names); None when not a bitmask."""
    try:
        mask = int(value.strip(), 16)
    except ValueError:
        return None
    names = [name for bit, (name, _slow) in NVIDIA_THROTTLE_BITS.items() if mask & bit]
    slowed = any(slow for bit, (_name, slow) in NVIDIA_THROTTLE_BITS.items() if mask & bit)
    return slowed, ",".join(names) or "none"


def _first(row: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((row[n] for n in names if n in row and row[n] is not None), None)


def parse_nvidia_smi_csv(text: str) -> tuple[list[Sensor], list[Throttle]]:
    """`nvidia-smi --query-gpu=...,temperature.gpu,clocks_throttle_reasons.active,clocks.sm --format=csv`.

    One GPU per row, named by `index`, else `uuid`, else its row; a capture of many samples (one GPU
    logged over time) keeps each GPU's last row. The header names the columns (units in brackets).
    """
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), skipinitialspace=True))
    except csv.Error as exc:  # a stray carriage return or NUL: no CSV nvidia-smi printed
        raise ThermalParseError(f"nvidia-smi output is no CSV: {exc}") from None
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise ThermalParseError("nvidia-smi printed nothing")
    header = [_UNIT.sub("", cell.strip()) for cell in rows[0]]
    if "temperature.gpu" not in header:
        raise ThermalParseError("nvidia-smi output has no temperature.gpu column (expected --format=csv with a header)")
    latest: dict[str, dict[str, str]] = {}
    for number, cells in enumerate(rows[1:]):
        if len(cells) != len(header):
            raise ThermalParseError(
                f"nvidia-smi row {number + 2} has {len(cells)} fields; the header has {len(header)}"
            )
        row = dict(zip(header, cells, strict=True))
        gpu = (row.get("index") or row.get("uuid") or str(number)).strip()
        latest[gpu] = row
    sensors: list[Sensor] = []
    throttles: list[Throttle] = []
    for gpu, row in latest.items():
        name = f"GPU {gpu}"
        celsius = _number(row["temperature.gpu"])
        if celsius is not None:
            sensors.append(Sensor("nvidia-smi", name, (row.get("name") or "gpu").strip(), celsius))
        throttles += _gpu_indicators(name, row)
    return sensors, throttles


def _gpu_indicators(name: str, row: dict[str, str]) -> list[Throttle]:
    """One GPU's clocks event reasons, SM clock and how busy it was, where the row has them."""
    out: list[Throttle] = []
    reasons = _first(row, _REASONS_COLUMNS)
    decoded = _reasons(reasons) if reasons is not None else None
    if reasons is not None and decoded is not None:
        out.append(Throttle("nvidia-smi", f"{name} clocks_event_reasons", reasons.strip(), *decoded))
    clock = _first(row, _SM_CLOCK_COLUMNS)
    mhz = _number(clock) if clock is not None else None
    if mhz is not None:
        out.append(Throttle("nvidia-smi", f"{name} sm_clock_mhz", f"{mhz:g}", False, "SM clock (MHz)"))
    busy = _number(row["utilization.gpu"]) if row.get("utilization.gpu") is not None else None
    if busy is not None:
        out.append(
            Throttle("nvidia-smi", f"{name} utilization_pct", f"{busy:g}", False, "GPU busy over the last sample (%)")
        )
    return out


# android.os.Temperature.TYPE_* and PowerManager.THERMAL_STATUS_* (Android's public API).
ANDROID_TYPES = {
    0: "CPU",
    1: "GPU",
    2: "BATTERY",
    3: "SKIN",
    4: "USB_PORT",
    5: "POWER_AMPLIFIER",
    6: "BCL_VOLTAGE",
    7: "BCL_CURRENT",
    8: "BCL_PERCENTAGE",
    9: "NPU",
    10: "TPU",
    11: "DISPLAY",
    12: "MODEM",
    13: "SOC",
    14: "WIFI",
    15: "CAMERA",
    16: "FLASHLIGHT",
    17: "SPEAKER",
    18: "AMBIENT",
    19: "POGO",
}
# BCL entries are battery voltage, current and percentage, not temperatures.
_NOT_TEMPERATURES = {6, 7, 8}
ANDROID_STATUS = {
    0: "NONE",
    1: "LIGHT",
    2: "MODERATE",
    3: "SEVERE",
    4: "CRITICAL",
    5: "EMERGENCY",
    6: "SHUTDOWN",
}
_TEMPERATURE = re.compile(
    r"Temperature\{mValue=(?P<value>[^,]+), mType=(?P<type>-?\d+), mName=(?P<name>[^,]*), mStatus=(?P<status>-?\d+)\}"
)
_STATUS = re.compile(r"^Thermal Status: (-?\d+)\s*$", re.MULTILINE)
_COOLING = re.compile(r"CoolingDevice\{mValue=(?P<value>-?\d+), mType=(?P<type>-?\d+), mName=(?P<name>[^}]*)\}")
# android.os.CoolingDevice.TYPE_*: which ones slow compute down when in force (the rest cool something
# else: a fan, the battery's charging, the display's brightness or frame rate, a radio).
ANDROID_COOLING_TYPES = {0: "FAN", 1: "BATTERY", 2: "CPU", 3: "GPU", 4: "MODEM", 5: "NPU", 6: "COMPONENT", 7: "TPU"}
_ANDROID_COMPUTE_COOLING = {2, 3, 5, 7}
# A temperature outside this range is no reading (a sensor's error code, a corrupted line), said as such.
PLAUSIBLE_CELSIUS = (-60.0, 200.0)


def plausible(celsius: float) -> bool:
    """Whether `celsius` can be a real device temperature (PLAUSIBLE_CELSIUS)."""
    return PLAUSIBLE_CELSIUS[0] <= celsius <= PLAUSIBLE_CELSIUS[1]


def _android_cooling(block: str) -> list[Throttle]:
    """The HAL's cooling devices: a CPU, GPU, NPU or TPU device above 0 is a throttle step in force; a
    fan is a fan; the others (battery, display, modem, ...) are reported, not counted as throttling."""
    out = []
    for match in _COOLING.finditer(block):
        kind, value, name = int(match["type"]), int(match["value"]), match["name"].strip()
        label = ANDROID_COOLING_TYPES.get(kind, str(kind))
        if kind in _ANDROID_COMPUTE_COOLING:
            out.append(
                Throttle("adb", f"cooling {name}", str(value), value > 0, f"{label} cooling device step {value}")
            )
        elif kind == 0:
            out.append(Throttle("adb", f"cooling {name}", str(value), False, f"fan at {value}", "fan"))
        else:
            detail = f"{label} cooling device at {value} (does not slow compute)"
            out.append(Throttle("adb", f"cooling {name}", str(value), False, detail, "other"))
    return out


def _android_sensors(block: str) -> list[Sensor]:
    sensors = []
    for match in _TEMPERATURE.finditer(block):
        kind = int(match["type"])
        value = _number(match["value"])
        if kind in _NOT_TEMPERATURES or value is None:
            continue
        sensors.append(Sensor("adb", match["name"].strip() or f"type{kind}", ANDROID_TYPES.get(kind, str(kind)), value))
    return sensors


def parse_dumpsys_thermalservice(text: str) -> tuple[list[Sensor], list[Throttle]]:
    """`adb shell dumpsys thermalservice`: the HAL's current temperatures (else the cached ones), the
    thermal status (any status above NONE is a throttle: LIGHT already slows some devices down) and the
    HAL's cooling devices (`_android_cooling`)."""
    status = _STATUS.search(text)
    if status is None:
        raise ThermalParseError("dumpsys thermalservice output has no 'Thermal Status:' line")
    current = text.split("Current temperatures from HAL:", 1)
    sensors = _android_sensors(current[1].split("Current cooling devices from HAL:", 1)[0]) if len(current) == 2 else []
    if not sensors:
        cached = text.split("Cached temperatures:", 1)
        sensors = _android_sensors(cached[1].split("HAL Ready:", 1)[0]) if len(cached) == 2 else []
    code = int(status.group(1))
    name = ANDROID_STATUS.get(code, f"unknown ({code})")
    cooling = text.split("Current cooling devices from HAL:", 1)
    devices = _android_cooling(cooling[1]) if len(cooling) == 2 else []  # only CoolingDevice{...} entries match
    return sensors, [Throttle("adb", "thermal_status", str(code), code > 0, name), *devices]


_PMSET_VALUE = re.compile(r"^\s*(CPU_Speed_Limit|CPU_Scheduler_Limit|CPU_Available_CPUs)\s*=\s*(\d+)\s*$", re.MULTILINE)
_PMSET_LEVEL = re.compile(r"^\s*(?:Thermal|Performance) Warning Level\s*=\s*(\d+)\s*$", re.MULTILINE | re.IGNORECASE)
_PMSET_NOTES = ("No thermal warning level has been recorded", "No performance warning level has been recorded")


def parse_pmset_therm(text: str) -> tuple[list[Sensor], list[Throttle]]:
    """`pmset -g therm`: no temperature, only limits. CPU_Speed_Limit or CPU_Scheduler_Limit under 100
    (per cent) or a recorded warning level is throttling; the last block of a log wins."""
    values: dict[str, int] = {}
    for match in _PMSET_VALUE.finditer(text):
        values[match.group(1)] = int(match.group(2))
    levels = [int(m.group(1)) for m in _PMSET_LEVEL.finditer(text)]
    if not values and not levels and not any(note in text for note in _PMSET_NOTES):
        raise ThermalParseError("pmset -g therm output has neither CPU_*_Limit lines nor warning-level notes")
    throttles = [
        Throttle("pmset", key, str(value), value < 100, f"{value} % of full speed")
        for key, value in values.items()
        if key != "CPU_Available_CPUs"
    ]
    if levels:
        throttles.append(Throttle("pmset", "warning_level", str(levels[-1]), levels[-1] > 0, "thermal warning level"))
    return [], throttles


# powermetrics (macOS, root only): the thermal sampler's pressure level (Apple silicon and Intel), the smc
# sampler's die temperatures (Intel Macs only), the cpu_power and gpu_power samplers' active frequencies.
_PM_BLOCK = "*** Sampled system activity"
_PM_PRESSURE = re.compile(r"^Current pressure level:\s*(\S+)\s*$", re.MULTILINE)
_PM_DIE = re.compile(r"^(CPU|GPU) die temperature:\s*(-?\d+(?:\.\d+)?)\s*C\s*$", re.MULTILINE)
_PM_CLOCK = re.compile(r"^((?:[EP]\d*-Cluster|GPU)) HW active frequency:\s*(\d+(?:\.\d+)?)\s*MHz\s*$", re.MULTILINE)


def parse_powermetrics(text: str) -> tuple[list[Sensor], list[Throttle]]:
    """`powermetrics --samplers thermal,cpu_power,gpu_power -n 1`: the last sample of its output.

    A pressure level other than Nominal is throttling (macOS lowers the clock ceiling for heat); die
    temperatures where the smc sampler printed them (Intel Macs); the clusters' and the GPU's active
    frequencies beside, as clocks (a clock falling under load is flagged by the run, not here).
    """
    last = text[text.rindex(_PM_BLOCK) :] if _PM_BLOCK in text else text
    pressure = _PM_PRESSURE.findall(last)
    dies = _PM_DIE.findall(last)
    clocks = _PM_CLOCK.findall(last)
    if not pressure and not dies and not clocks:
        raise ThermalParseError(
            "powermetrics output has no 'Current pressure level:', die temperature or HW active frequency line"
        )
    sensors = [Sensor("powermetrics", f"{unit} die", unit, float(value)) for unit, value in dies]
    throttles = [
        Throttle("powermetrics", "thermal_pressure", level, level != "Nominal", "macOS thermal pressure level")
        for level in pressure[-1:]
    ]
    throttles += [
        Throttle("powermetrics", f"{unit.lower()}_clock_mhz", f"{float(mhz):g}", False, f"{unit} active clock (MHz)")
        for unit, mhz in clocks
    ]
    return sensors, throttles


_TEGRA_SENSOR = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")
_TEGRA_GPU = re.compile(r"\bGR3D_FREQ (\d+)%(?:@\[?(\d+)\]?)?")


def parse_tegrastats(text: str) -> tuple[list[Sensor], list[Throttle]]:
    """The last line of `tegrastats` output (both layouts: with and without a date in front).

    Sensors are `NAME@TEMPC`; -256 C is tegrastats' mark for a sensor that is off. The GPU clock of
    `GR3D_FREQ n%@MHz`, where printed, is reported beside (a clock, not a throttle flag: the governor
    moves it with load).
    """
    lines = [line for line in text.splitlines() if "RAM " in line and "@" in line]
    if not lines:
        raise ThermalParseError("tegrastats output has no 'RAM ... NAME@TEMPC' line")
    line = lines[-1]
    sensors = [
        Sensor("tegrastats", name, name, float(value))
        for name, value in _TEGRA_SENSOR.findall(line)
        if float(value) > -256
    ]
    if not sensors:
        raise ThermalParseError("tegrastats line has no NAME@TEMPC sensor")
    impossible = [f"{s.name}@{s.celsius:g}C" for s in sensors if not plausible(s.celsius)]
    if impossible:
        raise ThermalParseError(
            f"tegrastats line has impossible temperatures {', '.join(impossible[:3])} "
            f"(accepted {PLAUSIBLE_CELSIUS[0]:g} to {PLAUSIBLE_CELSIUS[1]:g} C)"
        )
    throttles = []
    gpu = _TEGRA_GPU.search(line)
    if gpu is not None and gpu.group(2):
        throttles.append(Throttle("tegrastats", "gr3d_clock_mhz", gpu.group(2), False, "GPU clock (MHz)", "clock"))
    return sensors, throttles
