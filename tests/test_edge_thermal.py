"""The edge job's thermal state and its temperature-driven cooldown, on real layouts and real captures.

- sysfs: this machine's /sys/class/thermal and /sys/class/hwmon copied by the test (on the CI VM the
  first is empty and the second absent, which the readers must name), and the documented layouts of a
  Jetson (thermal zones `CPU-therm`, `GPU-therm`, ...), a Qualcomm Android phone (zones and
  `thermal-cpufreq-N` cooling devices) and a PC's hwmon `coretemp`, built by the test from their
  documented file names.
- tools: real captures of nvidia-smi, tegrastats and `adb shell dumpsys thermalservice` from the
  third-party data (`thermal/`, marker realdata), parsed directly and also printed by an executable
  script of the test's own put on PATH under the tool's name (the program's real output, driven by
  the test). No `pmset -g therm` capture is in the data: the test writes the layout published in
  fmorrisey/mac_sys_utils@f7410b5 (therm_logger/log/therm_log_2025-04-06.txt) itself.
- the cooldown waits on a temperature file that the test changes, and times out when it stays hot.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from fleetbench.config.edge import EdgeConfig
from fleetbench.edge import thermal
from fleetbench.edge.discipline import Watch
from fleetbench.edge.thermal import (
    CooldownRule,
    ThermalState,
    clock_drops,
    cool_down,
    read_state,
    throttling_between,
)
from fleetbench.edge.thermal_parse import (
    ThermalParseError,
    parse_dumpsys_thermalservice,
    parse_nvidia_smi_csv,
    parse_pmset_therm,
    parse_powermetrics,
    parse_tegrastats,
)
from testdata import get_test_data_dir

THERMAL = "thermal"
NVIDIA = "h800_nvidia_smi_query_gpu_event_reasons.csv"
XAVIER = "jetson_xaviernx_class_tegrastats_gpu_burn.log"
NANO = "jetson_nano_tegrastats.txt"
ANDROID = "android_qcom_dumpsys_thermalservice.txt"
# The attributes the readers use; sysfs files are copied one by one (a recursive copy of /sys can block).
ATTRIBUTES = ("type", "temp", "cur_state", "max_state", "name")


def capture(name: str) -> str:
    return (get_test_data_dir() / THERMAL / name).read_text(encoding="utf-8")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")


def copy_sysfs_class(source: Path, target: Path) -> None:
    """Copy a /sys/class/<x> folder's entries (symlinks into /sys/devices resolved) and the attributes read."""
    if not source.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        for attribute in entry.iterdir() if entry.is_dir() else ():
            wanted = attribute.name in ATTRIBUTES or (attribute.name.startswith("temp") and "_" in attribute.name)
            if not wanted or not attribute.is_file():
                continue
            try:
                text = attribute.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # a sensor the kernel refuses to read stays out, as it does for the reader
            write(target / entry.name / attribute.name, text.strip())


# --- sysfs ---------------------------------------------------------------------------------------


def test_this_machines_sysfs_copied_reads_as_the_live_one(tmp_path: Path) -> None:
    for kind in ("thermal", "hwmon"):
        copy_sysfs_class(Path("/sys/class") / kind, tmp_path / "sys" / "class" / kind)
    live = read_state(["thermal_zone", "hwmon"], Path("/"))
    copied = read_state(["thermal_zone", "hwmon"], tmp_path)
    assert [(s.name, s.kind) for s in copied.sensors] == [(s.name, s.kind) for s in live.sensors]
    assert [(t.name, t.detail) for t in copied.throttles] == [(t.name, t.detail) for t in live.throttles]
    assert set(copied.absent) == set(live.absent)
    if not live.sensors:
        # A VM (this CI machine): the sources are named absent with the reason, no sensor is made up.
        assert "thermal_zone" in live.absent and "hwmon" in live.absent
        assert copied.hottest() is None


def jetson_tree(root: Path, gpu_millidegrees: int = 38500) -> Path:
    """Jetson Xavier NX / Orin thermal zones as L4T names them (/sys/devices/virtual/thermal)."""
    zones = [("CPU-therm", 40000), ("GPU-therm", gpu_millidegrees), ("AUX-therm", 36500), ("AO-therm", 37500)]
    base = root / "sys" / "class" / "thermal"
    for index, (kind, value) in enumerate(zones):
        write(base / f"thermal_zone{index}" / "type", kind)
        write(base / f"thermal_zone{index}" / "temp", str(value))
    write(base / "cooling_device0" / "type", "pwm-fan")
    write(base / "cooling_device0" / "cur_state", "0")
    write(base / "cooling_device0" / "max_state", "255")
    return root


def test_a_jetson_layout_reads_every_zone_in_celsius(tmp_path: Path) -> None:
    state = read_state(["thermal_zone", "hwmon"], jetson_tree(tmp_path))
    assert {s.kind: s.celsius for s in state.sensors} == {
        "CPU-therm": 40.0,
        "GPU-therm": 38.5,
        "AUX-therm": 36.5,
        "AO-therm": 37.5,
    }
    assert state.hottest() is not None and state.hottest().kind == "CPU-therm"  # type: ignore[union-attr]
    assert [(t.name, t.active, t.role) for t in state.throttles] == [("cooling_device0", False, "fan")]
    assert state.absent == {"hwmon": f"{tmp_path}/sys/class/hwmon does not exist"}


def test_an_android_layout_with_a_cpufreq_cooling_device_in_force_is_throttling(tmp_path: Path) -> None:
    # Qualcomm zone types and the cpufreq cooling devices the kernel registers (thermal-cpufreq-N).
    base = tmp_path / "sys" / "class" / "thermal"
    for index, (kind, value) in enumerate([("cpu-0-0-usr", 45100), ("gpuss-0-usr", 43000), ("skin-msm-therm", 33000)]):
        write(base / f"thermal_zone{index}" / "type", kind)
        write(base / f"thermal_zone{index}" / "temp", str(value))
    write(base / "cooling_device0" / "type", "thermal-cpufreq-0")
    write(base / "cooling_device0" / "cur_state", "3")
    write(base / "cooling_device0" / "max_state", "20")
    # A zone whose sensor is off: the kernel answers EIO; here its temp is a folder, which fails as read does.
    (base / "thermal_zone3").mkdir()
    write(base / "thermal_zone3" / "type", "pa-therm0")
    (base / "thermal_zone3" / "temp").mkdir()
    state = read_state(["thermal_zone"], tmp_path)
    assert [s.kind for s in state.sensors] == ["cpu-0-0-usr", "gpuss-0-usr", "skin-msm-therm"]
    throttles = state.active_throttles()
    assert [(t.name, t.detail) for t in throttles] == [("cooling_device0", "thermal-cpufreq-0 state 3 of 20")]


def test_hwmon_chips_with_labels_and_unreadable_channels(tmp_path: Path) -> None:
    chip = tmp_path / "sys" / "class" / "hwmon" / "hwmon1"
    write(chip / "name", "coretemp")
    write(chip / "temp1_input", "52000")
    write(chip / "temp1_label", "Package id 0")
    write(chip / "temp2_input", "49000")  # no label: the channel names it
    (chip / "temp3_input").mkdir()
    write(tmp_path / "sys" / "class" / "hwmon" / "hwmon2" / "name", "nvme")
    state = read_state(["hwmon"], tmp_path)
    assert [(s.name, s.celsius) for s in state.sensors] == [
        ("hwmon1 coretemp Package id 0", 52.0),
        ("hwmon1 coretemp temp2", 49.0),
    ]
    assert state.absent == {}


# --- tools' captures ---------------------------------------------------------------------------------


@pytest.mark.realdata
def test_nvidia_smi_capture_rows_give_temperature_and_power_cap_throttling() -> None:
    text = capture(NVIDIA)
    header, *rows = text.splitlines()
    temperatures, power_capped = [], 0
    for row in rows:
        sensors, throttles = parse_nvidia_smi_csv(f"{header}\n{row}\n")
        temperatures.append(sensors[0].celsius)
        reasons = next(t for t in throttles if t.name.endswith("clocks_event_reasons"))
        power_capped += reasons.active
        assert reasons.active == ("sw_power_cap" in reasons.detail)
        assert any(t.name.endswith("sm_clock_mhz") for t in throttles)
    # The capture's README: 365 samples, temperature.gpu up to 48 C, 10 samples at SW power cap (0x4).
    assert len(rows) == 365 and max(temperatures) == 48.0 and power_capped == 10
    whole, _ = parse_nvidia_smi_csv(text)
    last = next(csv.reader([rows[-1]], skipinitialspace=True))
    assert [s.celsius for s in whole] == [float(last[header.split(", ").index("temperature.gpu")])]


@pytest.mark.realdata
def test_tegrastats_captures_of_two_jetsons() -> None:
    lines = capture(XAVIER).splitlines()
    gpu = [next(s.celsius for s in parse_tegrastats(line)[0] if s.name == "GPU") for line in lines]
    assert gpu[0] == 38.0 and max(gpu) == 53.0  # GPU@38C -> 53C under gpu_burn (the data's README)
    assert {s.name for s in parse_tegrastats(lines[0])[0]} == {"AUX", "CPU", "thermal", "AO", "GPU", "PMIC"}
    nano = parse_tegrastats(capture(NANO))
    assert 25.0 <= next(s.celsius for s in nano[0] if s.name == "GPU") <= 29.0
    assert [t.name for t in nano[1]] == ["gr3d_clock_mhz"]


@pytest.mark.realdata
def test_dumpsys_thermalservice_capture_gives_current_temperatures_and_status() -> None:
    sensors, throttles = parse_dumpsys_thermalservice(capture(ANDROID))
    by_name = {s.name: s for s in sensors}
    # Current (HAL) values, not the cached ones (CPUs cached at 79-90 C, current at 34-36 C).
    assert all(34.0 <= s.celsius <= 36.0 for s in sensors if s.kind == "CPU")
    assert by_name["battery"].celsius == 31.2 and by_name["battery"].kind == "BATTERY"
    assert not {"vbat", "ibat", "socd"} & set(by_name)  # battery voltage, current and percentage
    assert throttles[0] == thermal.Throttle("adb", "thermal_status", "0", False, "NONE")
    # the HAL's cooling devices: the GPU device at step 2 is throttling though the status says NONE; the
    # display backlight at 255 is no compute throttle; the CPU pause and cpufreq devices are at 0
    by_device = {t.name: t for t in throttles[1:]}
    assert by_device["cooling gpu"].active and by_device["cooling gpu"].value == "2"
    assert [t.name for t in throttles if t.active] == ["cooling gpu"]
    assert by_device["cooling panel0-backlight"].role == "other" and not by_device["cooling panel0-backlight"].active
    assert not by_device["cooling cpufreq-cpu7"].active and by_device["cooling cpufreq-cpu7"].role == "throttle"


# `pmset -g therm` as an Intel Mac prints it (the published log named in the module docstring), and
# as Apple silicon prints it (only the notes).
PMSET_INTEL = (
    "Note: No thermal warning level has been recorded\n"
    "Note: No performance warning level has been recorded\n"
    "2025-04-06 18:48:52 -0500 CPU Power notify\n"
    "\tCPU_Scheduler_Limit \t= 100\n"
    "\tCPU_Available_CPUs \t= 12\n"
    "\tCPU_Speed_Limit \t= {speed}\n"
)
PMSET_APPLE = "Note: No thermal warning level has been recorded\nNote: No performance warning level has been recorded\n"


def test_pmset_therm_speed_limits() -> None:
    _, full = parse_pmset_therm(PMSET_INTEL.format(speed=100))
    assert [(t.name, t.active) for t in full] == [("CPU_Scheduler_Limit", False), ("CPU_Speed_Limit", False)]
    _, slowed = parse_pmset_therm(PMSET_INTEL.format(speed=48))
    assert [t.detail for t in slowed if t.active] == ["48 % of full speed"]
    assert parse_pmset_therm(PMSET_APPLE) == ([], [])
    with pytest.raises(ThermalParseError, match="neither CPU_"):
        parse_pmset_therm("pmset: unknown option therm\n")


# `powermetrics --samplers thermal,cpu_power,gpu_power -n 1` in its documented layout (one "*** Sampled
# system activity" block per sample; the smc sampler's die temperatures only on Intel Macs). Figures ours.
POWERMETRICS_APPLE = """Machine model: Mac14,2
OS version: 24A335

*** Sampled system activity (Mon Dec  1 10:00:00 2026 +0000) (101.20ms elapsed) ***

**** Processor usage ****

E-Cluster HW active frequency: 1310 MHz
P-Cluster HW active frequency: 3204 MHz

**** GPU usage ****

GPU HW active frequency: 1398 MHz

**** Thermal pressure ****

Current pressure level: Nominal

*** Sampled system activity (Mon Dec  1 10:00:01 2026 +0000) (100.80ms elapsed) ***

**** Processor usage ****

E-Cluster HW active frequency: 1020 MHz
P-Cluster HW active frequency: 2424 MHz

**** GPU usage ****

GPU HW active frequency: 912 MHz

**** Thermal pressure ****

Current pressure level: {level}
"""
POWERMETRICS_INTEL_SMC = "**** SMC sensors ****\n\nCPU die temperature: 71.25 C\nGPU die temperature: 64.50 C\n"


def test_powermetrics_pressure_clocks_and_die_temperatures() -> None:
    sensors, throttles = parse_powermetrics(POWERMETRICS_APPLE.format(level="Nominal"))
    assert sensors == []  # Apple silicon prints no temperature
    assert {t.name: (t.value, t.active) for t in throttles} == {  # the last sample wins
        "thermal_pressure": ("Nominal", False),
        "e-cluster_clock_mhz": ("1020", False),
        "p-cluster_clock_mhz": ("2424", False),
        "gpu_clock_mhz": ("912", False),
    }
    _, heavy = parse_powermetrics(POWERMETRICS_APPLE.format(level="Heavy"))
    assert [(t.name, t.value) for t in heavy if t.active] == [("thermal_pressure", "Heavy")]
    sensors, _ = parse_powermetrics(POWERMETRICS_INTEL_SMC)
    assert [(s.name, s.celsius) for s in sensors] == [("CPU die", 71.25), ("GPU die", 64.5)]
    with pytest.raises(ThermalParseError, match="no 'Current pressure level:'"):
        parse_powermetrics("powermetrics: unrecognized sampler: smc\n")


def test_powermetrics_without_root_is_named_with_its_own_words(tool_path: Path) -> None:
    put_on_path(tool_path, "powermetrics", "echo 'powermetrics must be invoked as the superuser' >&2\nexit 1\n")
    state = read_state(["powermetrics"])
    assert state.absent == {
        "powermetrics": "powermetrics --samplers thermal,cpu_power,gpu_power -n 1 -i 100 failed: "
        "powermetrics must be invoked as the superuser"
    }


def test_powermetrics_on_path_gives_the_pressure_level(tool_path: Path, tmp_path: Path) -> None:
    (tmp_path / "pm.txt").write_text(POWERMETRICS_APPLE.format(level="Moderate"))
    put_on_path(tool_path, "powermetrics", f'[ "$1" = --samplers ] || exit 9\ncat "{tmp_path / "pm.txt"}"\n')
    state = read_state(["powermetrics"])
    assert [f"{t.key}={t.value}" for t in state.active_throttles()] == ["powermetrics/thermal_pressure=Moderate"]


# --- the tools found on PATH ---------------------------------------------------------------------------


def put_on_path(folder: Path, name: str, body: str) -> None:
    """An executable script of the test's own under the tool's name (it prints what the test gives it)."""
    script = folder / name
    script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def tool_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def test_absent_tools_are_named(tool_path: Path) -> None:
    tools = ("nvidia-smi", "adb", "pmset", "powermetrics", "tegrastats")
    state = read_state(list(tools))
    assert state.absent == {tool: f"{tool} not on PATH" for tool in tools}
    assert state.sensors == [] and state.throttles == []


def test_adb_without_a_device_is_named_with_adbs_own_words(tool_path: Path) -> None:
    put_on_path(tool_path, "adb", "echo 'adb: no devices/emulators found' >&2\nexit 1\n")
    state = read_state(["adb"])
    assert state.absent == {"adb": "adb shell dumpsys thermalservice failed: adb: no devices/emulators found"}


@pytest.mark.realdata
def test_tools_on_path_printing_real_captures(tool_path: Path, tmp_path: Path) -> None:
    for name in (NVIDIA, ANDROID, XAVIER):
        shutil.copy(get_test_data_dir() / THERMAL / name, tmp_path / name)
    put_on_path(tool_path, "nvidia-smi", f'case "$1" in --query-gpu=*) cat "{tmp_path / NVIDIA}";; *) exit 9;; esac\n')
    put_on_path(tool_path, "adb", f'[ "$*" = "shell dumpsys thermalservice" ] || exit 9\ncat "{tmp_path / ANDROID}"\n')
    # tegrastats streams one line per interval until it is stopped.
    put_on_path(tool_path, "tegrastats", f'while :; do cat "{tmp_path / XAVIER}"; sleep 1; done\n')
    state = read_state(["nvidia-smi", "adb", "tegrastats", "pmset"])
    assert {s.source for s in state.sensors} == {"nvidia-smi", "adb", "tegrastats"}
    assert next(s for s in state.sensors if s.source == "tegrastats" and s.name == "GPU").celsius == 38.0
    assert state.absent == {"pmset": "pmset not on PATH"}


def test_a_tool_that_prints_something_else_is_named_not_guessed(tool_path: Path) -> None:
    put_on_path(tool_path, "nvidia-smi", "echo 'NVIDIA-SMI has failed because it could not communicate'\n")
    state = read_state(["nvidia-smi"])
    assert state.absent["nvidia-smi"].startswith("nvidia-smi output not understood: nvidia-smi output has no")


# --- throttling and the cooldown ---------------------------------------------------------------------


def test_throttling_is_reported_from_either_side_of_a_measurement(tmp_path: Path) -> None:
    jetson_tree(tmp_path)
    base = tmp_path / "sys" / "class" / "thermal"
    write(base / "cooling_device1" / "type", "thermal-cpufreq-0")
    write(base / "cooling_device1" / "cur_state", "0")
    write(base / "cooling_device1" / "max_state", "15")
    before = read_state(["thermal_zone"], tmp_path)
    write(base / "cooling_device1" / "cur_state", "3")
    after = read_state(["thermal_zone"], tmp_path)
    assert throttling_between(before, before) == []
    assert throttling_between(before, after) == [
        "thermal_zone/cooling_device1=3 (thermal-cpufreq-0 state 3 of 15, after)"
    ]


def test_a_fan_spinning_up_is_a_fan_not_throttling(tmp_path: Path) -> None:
    # a fan cools without slowing anything: a pwm-fan at 120 of 255 is reported as a fan, never as throttling
    jetson_tree(tmp_path)
    before = read_state(["thermal_zone"], tmp_path)
    write(tmp_path / "sys" / "class" / "thermal" / "cooling_device0" / "cur_state", "120")
    after = read_state(["thermal_zone"], tmp_path)
    assert throttling_between(before, after) == []
    (fan,) = after.throttles
    assert fan.role == "fan" and fan.detail == "fan: pwm-fan state 120 of 255" and not fan.active


def nvidia_rows() -> tuple[str, list[str]]:
    """The real nvidia-smi log's header line and its sample lines, in the order it was taken."""
    lines = capture(NVIDIA).splitlines()
    return lines[0], [line for line in lines[1:] if line.strip()]


@pytest.mark.realdata
def test_the_clock_drop_rule_on_a_real_log_flags_what_nvml_called_a_power_cap_and_no_idle_sample() -> None:
    header, samples = nvidia_rows()
    columns = [c.split(" [")[0] for c in next(csv.reader([header], skipinitialspace=True))]
    peaks: dict[str, float] = {}
    flagged, idle_flagged, nvml_slowed = 0, 0, 0
    for line in samples:
        row = dict(zip(columns, next(csv.reader([line], skipinitialspace=True)), strict=True))
        reasons = int(row["clocks_event_reasons.active"], 16)
        idle = bool(reasons & 0x1) or row["utilization.gpu"] == "0 %"
        sensors, throttles = parse_nvidia_smi_csv(header + "\n" + line + "\n")
        drops = clock_drops(ThermalState(sensors, throttles), peaks)
        flagged += bool(drops)
        idle_flagged += bool(drops) and idle
        nvml_slowed += bool(drops) and bool(reasons & 0x4)  # sw_power_cap
        assert all("clock drop" in d and "fell to 1785 MHz from 1980 MHz" in d for d in drops), drops
    # the busy samples under the power cap ran at 1785 MHz after the GPU had reached 1980 (-10 %): the rule
    # sees them from the clock alone, and NVML's reasons say the same; an idle GPU's low clock is no drop
    assert flagged == 9 and nvml_slowed == 9 and idle_flagged == 0


@pytest.mark.realdata
def test_a_measurement_whose_clock_fell_is_throttled_though_no_reason_was_set(tool_path: Path, tmp_path: Path) -> None:
    header, samples = nvidia_rows()
    busy_full = next(line for line in samples if "1980 MHz, 2619" in line and ", 100 %," in line)
    capped = next(line for line in samples if ", 0x0000000000000004," in line and ", 100 %," in line)
    # the capped sample with its reasons cleared: only its clock says it was slowed
    quiet_capped = capped.replace(", 0x0000000000000004,", ", 0x0000000000000000,")
    current = tmp_path / "current.csv"
    current.write_text(header + "\n" + busy_full + "\n")
    put_on_path(tool_path, "nvidia-smi", f'cat "{current}"\n')

    def measure_then_read(line: str) -> Callable[[], None]:
        # what the GPU reports right after this measurement's tries
        return lambda: current.write_text(header + "\n" + line + "\n") and None

    cfg = EdgeConfig(thermal_sources=["nvidia-smi"], cooldown_s=0.01, cooldown_timeout_s=0)
    watch = Watch.start(cfg)
    _, first = watch.around(measure_then_read(busy_full))
    _, second = watch.around(measure_then_read(quiet_capped))
    assert first.throttled is False and first.throttle_reasons == []
    assert second.throttled is True
    assert any("sm_clock_mhz fell to 1785 MHz from 1980 MHz" in r for r in second.throttle_reasons)
    assert any("clock drop" in w for w in second.warnings)


def test_cooldown_waits_until_the_temperature_file_is_back_near_idle(tmp_path: Path) -> None:
    jetson_tree(tmp_path, gpu_millidegrees=38000)
    baseline = read_state(["thermal_zone"], tmp_path)
    gpu_temp = tmp_path / "sys" / "class" / "thermal" / "thermal_zone1" / "temp"
    gpu_temp.write_text("47000\n")  # hot after a kernel
    readings: list[ThermalState] = []

    def read() -> ThermalState:
        readings.append(read_state(["thermal_zone"], tmp_path))
        if len(readings) == 3:
            gpu_temp.write_text("39500\n")  # the device cools down: within 2 C of its idle 38 C
        return readings[-1]

    rule = CooldownRule(min_s=0.0, margin_c=2.0, timeout_s=60.0, poll_s=0.05)
    result = cool_down(baseline, read, rule)
    assert result.driven_by == "temperature" and result.warning is None
    assert len(readings) == 4  # three hot readings, then the cool one ended the wait


def test_cooldown_times_out_with_a_warning_naming_the_hot_sensor(tmp_path: Path) -> None:
    jetson_tree(tmp_path, gpu_millidegrees=38000)
    baseline = read_state(["thermal_zone"], tmp_path)
    (tmp_path / "sys" / "class" / "thermal" / "thermal_zone1" / "temp").write_text("47000\n")
    rule = CooldownRule(min_s=0.0, margin_c=2.0, timeout_s=0.3, poll_s=0.05)
    result = cool_down(baseline, lambda: read_state(["thermal_zone"], tmp_path), rule)
    assert result.warning is not None and result.waited_s >= 0.3
    assert "cooldown timed out after" in result.warning
    assert (
        "thermal_zone/thermal_zone1 at 47.0 C, above the target 42.0 C "
        "(idle reading 40.0 C of thermal_zone/thermal_zone0 + 2 C)" in result.warning
    )
    assert result.target_c == 42.0


def test_cooldown_waits_for_an_absolute_target_even_when_the_run_started_hot(tmp_path: Path) -> None:
    # the run's first reading was already hot (78 C): relative to it, 79.5 C looked "cool"; a configured
    # target is absolute, so the wait goes on until the sensor is under it, or says it timed out
    jetson_tree(tmp_path, gpu_millidegrees=78000)
    baseline = read_state(["thermal_zone"], tmp_path)
    gpu_temp = tmp_path / "sys" / "class" / "thermal" / "thermal_zone1" / "temp"
    gpu_temp.write_text("79500\n")
    relative = CooldownRule(min_s=0.0, margin_c=2.0, timeout_s=0.2, poll_s=0.05)
    assert cool_down(baseline, lambda: read_state(["thermal_zone"], tmp_path), relative).waited_s < 0.2
    absolute = CooldownRule(min_s=0.0, margin_c=2.0, timeout_s=0.2, poll_s=0.05, target_c=45.0)
    timed_out = cool_down(baseline, lambda: read_state(["thermal_zone"], tmp_path), absolute)
    assert timed_out.warning is not None and timed_out.waited_s >= 0.2
    assert "at 79.5 C, above the target 45.0 C (configured (edge.cooldown_target_c))" in timed_out.warning
    gpu_temp.write_text("44000\n")
    cooled = cool_down(baseline, lambda: read_state(["thermal_zone"], tmp_path), absolute)
    assert cooled.warning is None and cooled.target_c == 45.0


@pytest.mark.realdata
@pytest.mark.parametrize("log", [XAVIER, NANO])
def test_on_both_jetson_logs_the_hottest_sensor_is_the_hottest_that_moves(log: str) -> None:
    # PMIC@50C is printed constant on both boards: the hottest reading, but a fixed value, not heat
    states = [ThermalState(*parse_tegrastats(line)) for line in capture(log).splitlines() if "RAM " in line]
    watch = Watch(("tegrastats",), Path("/"), CooldownRule(0.0, 2.0, 1.0, 0.1), states[0])
    for state in states:
        watch._seen(state)
    assert "tegrastats/PMIC" not in watch.moving
    constant_first = [s for s in states if s.hottest() is not None and s.hottest().name == "PMIC"]  # type: ignore[union-attr]
    assert constant_first  # the naive rule shows PMIC@50C as the hottest sensor on these readings
    for state in constant_first:
        hottest = state.hottest(watch.moving)
        assert hottest is not None and hottest.name != "PMIC" and hottest.key in watch.moving


def test_cooldown_in_a_thread_follows_a_file_another_thread_cools(tmp_path: Path) -> None:
    jetson_tree(tmp_path, gpu_millidegrees=38000)
    baseline = read_state(["thermal_zone"], tmp_path)
    gpu_temp = tmp_path / "sys" / "class" / "thermal" / "thermal_zone1" / "temp"
    gpu_temp.write_text("60000\n")
    results = []
    rule = CooldownRule(min_s=0.0, margin_c=1.0, timeout_s=120.0, poll_s=0.02)
    waiter = threading.Thread(
        target=lambda: results.append(cool_down(baseline, lambda: read_state(["thermal_zone"], tmp_path), rule))
    )
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()  # still waiting on the hot sensor
    gpu_temp.write_text("38400\n")
    waiter.join(timeout=60)
    assert results and results[0].warning is None and results[0].driven_by == "temperature"


def test_without_sensors_the_cooldown_is_the_fixed_minimum_and_says_so() -> None:
    rule = CooldownRule(min_s=0.01, margin_c=2.0, timeout_s=5.0, poll_s=0.1)
    result = cool_down(ThermalState(absent={"hwmon": "x"}), lambda: ThermalState(), rule)
    assert result.driven_by == "fixed" and result.warning is None and result.waited_s >= 0.01


# --- damaged captures: a clean answer or a clean refusal -------------------------------------------------

PARSERS = [parse_nvidia_smi_csv, parse_dumpsys_thermalservice, parse_pmset_therm, parse_powermetrics, parse_tegrastats]


def parses_or_refuses(parse: thermal.Parser, text: str) -> None:
    try:
        sensors, throttles = parse(text)
    except ThermalParseError as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(s.celsius, float) and s.celsius == s.celsius for s in sensors)
    assert all(isinstance(t.active, bool) for t in throttles)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(
        alphabet=st.sampled_from(list("Temperature{mValue=,Type}Thermal Status: 0x1@CRAM.GPU\n\t -_9[N/A]")),
        max_size=300,
    )
)
def test_parsers_on_fuzzed_text(text: str) -> None:
    for parse in PARSERS:
        parses_or_refuses(parse, text)


@pytest.mark.realdata
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_parsers_on_damaged_real_captures(data: st.DataObject) -> None:
    name, parse = data.draw(
        st.sampled_from(
            [
                (NVIDIA, parse_nvidia_smi_csv),
                (ANDROID, parse_dumpsys_thermalservice),
                (XAVIER, parse_tegrastats),
                (NANO, parse_tegrastats),
            ]
        )
    )
    text = capture(name)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    junk = data.draw(st.text(max_size=20))
    parses_or_refuses(parse, text[:start] + junk + text[end:])


def test_a_fifo_in_sysfs_does_not_block_and_impossible_states_are_said(tmp_path: Path) -> None:
    jetson_tree(tmp_path)
    base = tmp_path / "sys" / "class" / "thermal"
    (base / "thermal_zone2" / "temp").unlink()
    os.mkfifo(base / "thermal_zone2" / "temp")  # no writer: a blocking open would hang here
    write(base / "thermal_zone3" / "temp", "999999999")  # 999999 C: no temperature
    write(base / "cooling_device1" / "type", "thermal-cpufreq-0")
    write(base / "cooling_device1" / "cur_state", "9" * 5000)  # int() of 5,000 digits raises in Python 3.11
    write(base / "cooling_device2" / "type", "thermal-cpufreq-1")
    write(base / "cooling_device2" / "cur_state", "7")
    write(base / "cooling_device2" / "max_state", "3")
    start = time.monotonic()
    state = read_state(["thermal_zone"], tmp_path)
    assert time.monotonic() - start < 5
    assert {s.kind for s in state.sensors} == {"CPU-therm", "GPU-therm"}
    assert [t.name for t in state.throttles] == ["cooling_device0"]
    assert len(state.notes) == 3
    assert "thermal_zone3 (AO-therm): 1e+06 C is no temperature; ignored" in state.notes[0]
    assert state.notes[1].startswith("cooling_device1 (thermal-cpufreq-0): cur_state '99999999999999999999' is no")
    assert state.notes[2] == "cooling_device2 (thermal-cpufreq-1): cur_state 7 is past its max_state 3; ignored"


def test_a_silent_tegrastats_is_no_reading_after_a_bounded_wait(
    tool_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thermal, "STREAM_TIMEOUT_S", 0.3)
    put_on_path(tool_path, "tegrastats", "exec sleep 30\n")
    start = time.monotonic()
    state = read_state(["tegrastats"])
    assert time.monotonic() - start < 5
    assert state.absent == {"tegrastats": "tegrastats printed no line within 0.3 s: no reading"}


def test_a_tegrastats_line_with_impossible_temperatures_is_said(tool_path: Path) -> None:
    line = "RAM 936/3964MB (lfb 366x4MB) CPU [10%@102] GR3D_FREQ 0%@76 CPU@27.5C GPU@9999C PMIC@50C"
    put_on_path(tool_path, "tegrastats", f"while :; do echo '{line}'; sleep 1; done\n")
    state = read_state(["tegrastats"])
    assert state.sensors == []
    assert state.absent["tegrastats"] == (
        "tegrastats output not understood: tegrastats line has impossible temperatures GPU@9999C "
        "(accepted -60 to 200 C)"
    )


def test_read_state_on_an_empty_root_names_every_sysfs_source(tmp_path: Path) -> None:
    state = read_state(["thermal_zone", "hwmon"], tmp_path)
    assert state.absent == {
        "thermal_zone": f"{tmp_path}/sys/class/thermal does not exist",
        "hwmon": f"{tmp_path}/sys/class/hwmon does not exist",
    }
    assert os.listdir(tmp_path) == []  # reading writes nothing


@pytest.mark.vulkan
def test_an_edge_run_carries_the_thermal_state_of_a_throttling_board(vulkan: None, tmp_path: Path) -> None:
    root = jetson_tree(tmp_path / "board")
    write(root / "sys" / "class" / "thermal" / "cooling_device1" / "type", "thermal-cpufreq-0")
    write(root / "sys" / "class" / "thermal" / "cooling_device1" / "cur_state", "2")
    results = tmp_path / "r"
    done = run_cli(
        "edge",
        "run",
        "--quick",
        "--backend",
        "vulkan",
        "--kernels",
        "silu",
        "--results-dir",
        str(results),
        "--run-id",
        "hot",
        "--set",
        f"edge.thermal_root={root}",
        "--set",
        "edge.thermal_sources=[thermal_zone,hwmon]",
        cwd=tmp_path,
        unset=("WGPU_BACKEND_TYPE",),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((results / "hot" / "edge_results.json").read_text())
    row = result["kernels"][0]
    assert row["celsius_before"] == 40.0 and row["celsius_after"] == 40.0
    assert row["throttled"] is True
    assert row["throttle_reasons"] == ["thermal_zone/cooling_device1=2 (thermal-cpufreq-0 state 2, before)"]
    assert row["thermal"]["before"]["absent"] == {"hwmon": f"{root}/sys/class/hwmon does not exist"}
    assert result["thermal"]["absent"] == {"hwmon": f"{root}/sys/class/hwmon does not exist"}
    exposition = (results / "hot" / "fleetbench_edge_rank0.prom").read_text()
    assert "fleetbench_edge_kernel_throttled{" in exposition and 'phase="before"' in exposition
    assert "fleetbench_edge_thermal_source_up{" in exposition and 'source="hwmon"} 0.0' in exposition
    assert "throttled during the measurement" in done.stderr
