"""Energy: RAPL on a powercap tree the test builds (packages, sub-zones, wraparound, unreadable), NVML's
absence said in words, tegrastats' input rail on two real Jetson captures, the meter's figures, and the
sampled power of edge boards (tegrastats, powermetrics, a battery on Linux or over adb) from tools on PATH
that print what the real ones print."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetbench.energy import rapl, sampled, tegrastats
from fleetbench.energy.meter import EnergyMeter, EnergyReading
from testdata import get_test_data_dir, missing_reason

RANGE_UJ = 262143328850  # max_energy_range_uj of an Intel package zone


def zone(root: Path, folder: str, name: str, energy_uj: int, largest: int = RANGE_UJ) -> None:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{largest}\n")


def set_energy(root: Path, folder: str, energy_uj: int) -> None:
    (root / folder / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture
def powercap(tmp_path: Path) -> Path:
    """Two packages with a core sub-zone each, as an Intel two-socket server lays them out."""
    root = tmp_path / "powercap"
    zone(root, "intel-rapl:0", "package-0", 1_000_000)
    zone(root, "intel-rapl:0:0", "core", 500_000)
    zone(root, "intel-rapl:1", "package-1", 2_000_000)
    zone(root, "intel-rapl:1:0", "core", 700_000)
    return root


def test_packages_are_summed_and_sub_zones_left_out(powercap: Path) -> None:
    before, why = rapl.read_zones(powercap)
    assert why is None and [z.name for z in before] == ["package-0", "package-1"]
    set_energy(powercap, "intel-rapl:0", 4_000_000)  # +3 J
    set_energy(powercap, "intel-rapl:1", 2_500_000)  # +0.5 J
    set_energy(powercap, "intel-rapl:0:0", 9_000_000)  # a part of package-0: not added again
    after, _ = rapl.read_zones(powercap)
    assert rapl.joules_between(before, after) == pytest.approx(3.5)


def test_a_counter_that_wrapped_is_unwrapped(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    zone(root, "intel-rapl:0", "package-0", RANGE_UJ - 1_000_000)
    before, _ = rapl.read_zones(root)
    set_energy(root, "intel-rapl:0", 2_000_000)  # 1 J to the top, 1 uJ to wrap to 0, then 2 J
    after, _ = rapl.read_zones(root)
    assert rapl.joules_between(before, after) == pytest.approx(3.000001)


def test_unreadable_rapl_says_why(tmp_path: Path) -> None:
    assert "no powercap folder" in (rapl.read_zones(tmp_path / "absent")[1] or "")
    (tmp_path / "empty").mkdir()
    assert "no intel-rapl package zone" in (rapl.read_zones(tmp_path / "empty")[1] or "")
    broken = tmp_path / "broken"
    zone(broken, "intel-rapl:0", "package-0", 1)
    (broken / "intel-rapl:0" / "energy_uj").unlink()
    (broken / "intel-rapl:0" / "energy_uj").mkdir()  # a file no user can read as a number, root included
    zones, why = rapl.read_zones(broken)
    assert zones == [] and "intel-rapl:0" in (why or "")


def test_the_meter_gives_joules_per_step_and_token_and_watts(powercap: Path) -> None:
    meter = EnergyMeter(powercap=powercap).start()
    set_energy(powercap, "intel-rapl:0", 11_000_000)  # +10 J
    reading = meter.stop()
    assert reading.source == "rapl" and reading.joules == pytest.approx(10.0) and reading.reason is None
    summary = reading.summary(steps=5, tokens=1000)
    assert summary["joules_per_step"] == pytest.approx(2.0)
    assert summary["joules_per_token"] == pytest.approx(0.01)
    assert summary["average_watts"] == pytest.approx(10.0 / reading.seconds)


def test_no_source_gives_no_figure_and_the_reason(tmp_path: Path) -> None:
    reading = EnergyMeter(powercap=tmp_path / "absent").start().stop()
    assert reading.joules is None and reading.watts is None and reading.per(10) is None
    assert reading.reason is not None and reading.reason.startswith("rapl: no powercap folder")
    gpu = EnergyMeter(gpu_index=0).start().stop()
    if gpu.joules is None:  # no NVIDIA driver (or no nvidia-ml-py) here: said, not invented
        assert "nvml" in gpu.reasons and gpu.reason is not None
    else:
        assert gpu.source == "nvml" and gpu.joules >= 0


def test_reading_arithmetic() -> None:
    reading = EnergyReading("nvml", 300.0, 2.0)
    assert reading.watts == 150.0 and reading.per(3) == 100.0 and reading.per(0) is None


needs_data = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@needs_data
def test_tegrastats_input_rail_of_two_real_jetsons() -> None:
    thermal = get_test_data_dir() / "thermal"
    xavier = (thermal / "jetson_xaviernx_class_tegrastats_gpu_burn.log").read_text().splitlines()
    nano = (thermal / "jetson_nano_tegrastats.txt").read_text().splitlines()
    assert tegrastats.input_watts(xavier[0]) == pytest.approx(5.542)  # VDD_IN 5542mW/5542mW
    assert tegrastats.input_watts(nano[0]) == pytest.approx(0.920)  # POM_5V_IN 920/920
    assert tegrastats.input_watts(nano[1]) == pytest.approx(1.537)  # current, not the average (1228)
    watts = [w for w in (tegrastats.input_watts(line) for line in xavier) if w is not None]
    assert len(watts) == len(xavier) and max(watts) == pytest.approx(13.8, abs=0.1)
    # 1 s apart: the trapezoid of the power, checked by hand on the first three lines.
    first = watts[:3]
    assert tegrastats.joules(xavier[:3], 1.0) == pytest.approx((first[0] + first[1]) / 2 + (first[1] + first[2]) / 2)
    total = tegrastats.joules(xavier, 1.0) or 0
    assert min(watts) * (len(xavier) - 1) <= total <= max(watts) * (len(xavier) - 1)


def test_tegrastats_without_an_input_rail() -> None:
    assert tegrastats.input_watts("RAM 936/3964MB CPU [10%@102] GPU@28C") is None
    assert tegrastats.joules(["RAM 1/2MB"], 1.0) is None


# --- sampled power at the edge: stand-in tools on PATH print what real ones print -------------------------
def put_on_path(folder: Path, name: str, body: str) -> None:
    script = folder / name
    script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    script.chmod(0o755)


@pytest.fixture
def tool_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def metered(sources: tuple[str, ...], seconds: float = 0.6) -> EnergyReading:
    meter = EnergyMeter(sampled=sources, read_rapl=False).start()
    time.sleep(seconds)
    return meter.stop()


def test_a_constant_power_gives_watts_times_seconds(tool_path: Path) -> None:
    put_on_path(
        tool_path, "tegrastats", "while :; do echo 'RAM 1/2MB GPU@38C VDD_IN 10000mW/9000mW'; sleep 0.02; done\n"
    )
    reading = metered(("tegrastats",))
    assert reading.source == "tegrastats" and reading.watts == pytest.approx(10.0)  # the current, not the average
    assert reading.joules == pytest.approx(10.0 * reading.seconds)
    assert reading.covered_share is not None and 0.5 < reading.covered_share <= 1


@needs_data
def test_tegrastats_streaming_a_real_capture_averages_within_its_range(tool_path: Path, tmp_path: Path) -> None:
    capture = get_test_data_dir() / "thermal" / "jetson_xaviernx_class_tegrastats_gpu_burn.log"
    lines = capture.read_text().splitlines()
    watts = [w for w in map(tegrastats.input_watts, lines) if w is not None]
    (tmp_path / "capture.log").write_text(capture.read_text())
    put_on_path(
        tool_path,
        "tegrastats",
        f'while read -r line; do echo "$line"; sleep 0.005; done < "{tmp_path / "capture.log"}"\nsleep 5\n',
    )
    reading = metered(("tegrastats",), 1.0)
    assert reading.source == "tegrastats" and reading.watts is not None
    assert min(watts) <= reading.watts <= max(watts)


def test_powermetrics_combined_power_is_read(tool_path: Path) -> None:
    body = "while :; do echo '*** Sampled system activity'; echo 'CPU Power: 900 mW'; echo 'GPU Power: 300 mW';"
    body += " echo 'Combined Power (CPU + GPU + ANE): 1250 mW'; sleep 0.02; done\n"
    put_on_path(tool_path, "powermetrics", body)
    reading = metered(("powermetrics",))
    assert reading.source == "powermetrics" and reading.watts == pytest.approx(1.25)


def test_powermetrics_without_root_says_so(tool_path: Path) -> None:
    put_on_path(tool_path, "powermetrics", "echo 'powermetrics must be invoked as the superuser' >&2\nexit 1\n")
    reading = metered(("powermetrics",), 0.2)
    assert reading.joules is None and "must be invoked as the superuser" in reading.reasons["powermetrics"]


def battery(root: Path, **files: str) -> Path:
    folder = root / "BAT0"
    folder.mkdir(parents=True)
    (folder / "type").write_text("Battery\n")
    for name, text in files.items():
        (folder / name).write_text(text + "\n")
    return root


def test_a_discharging_battery_gives_its_power_and_a_charging_one_says_why(tmp_path: Path) -> None:
    assert sampled.read_battery(battery(tmp_path / "a", status="Discharging", power_now="7500000")) == (7.5, None)
    # current in µA (negative while discharging on some drivers) x voltage in µV
    both = battery(tmp_path / "b", status="Discharging", current_now="-500000", voltage_now="3800000")
    assert sampled.read_battery(both)[0] == pytest.approx(1.9)
    watts, why = sampled.read_battery(battery(tmp_path / "c", status="Charging", power_now="7500000"))
    assert watts is None and why is not None and "charging" in why
    assert sampled.read_battery(tmp_path / "none") == (None, f"no battery under {tmp_path / 'none'}")


def test_an_android_battery_over_adb(tool_path: Path) -> None:
    put_on_path(tool_path, "adb", "echo status=Discharging; echo current_now=-400000; echo voltage_now=4000000\n")
    reading = metered(("adb",), 0.4)
    assert reading.source == "adb" and reading.watts == pytest.approx(1.6)
    put_on_path(tool_path, "adb", "echo 'adb: no devices/emulators found' >&2\nexit 1\n")
    reading = metered(("adb",), 0.1)
    assert reading.joules is None and reading.reasons["adb"] == "adb shell failed: adb: no devices/emulators found"


def test_no_sampled_source_gives_each_reason_and_no_figure(tool_path: Path) -> None:
    reading = metered(("tegrastats", "powermetrics"), 0.1)
    assert reading.joules is None and reading.watts is None
    assert reading.reasons == {"tegrastats": "tegrastats not on PATH", "powermetrics": "powermetrics not on PATH"}


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    line=st.text(alphabet=st.sampled_from(list("VDD_IN POM_5V Combined Power (CPU + GPU + ANE): mW/0123456789.-e\n")),
                 max_size=120),
    files=st.dictionaries(st.sampled_from(["status", "power_now", "current_now", "voltage_now"]),
                          st.text(max_size=30) | st.sampled_from(["Discharging", "Charging", "1e999", "-5", "nan", ""]),
                          max_size=4),
)  # fmt: skip
def test_power_parsers_give_a_finite_figure_or_none(line: str, files: dict[str, str]) -> None:
    for watts in (tegrastats.input_watts(line), sampled.powermetrics_watts(line)):
        assert watts is None or (math.isfinite(watts) and watts >= 0)
    watts, why = sampled.battery_watts(files)
    assert (watts is None) != (why is None)
    assert watts is None or (math.isfinite(watts) and watts >= 0)


@pytest.mark.parametrize(
    "line",
    ["VDD_IN " + "9" * 5000 + "mW/1mW", "Combined Power (CPU + GPU + ANE): " + "9" * 400 + " mW",
     "POM_5V_IN 12345678901/1"],
)  # fmt: skip
def test_a_number_no_tool_prints_is_no_reading(line: str) -> None:
    assert tegrastats.input_watts(line) is None and sampled.powermetrics_watts(line) is None
