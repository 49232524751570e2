"""Energy from sampled power, where a device prints watts instead of keeping an energy counter: Jetson's
tegrastats (the board's input rail), macOS's powermetrics (combined CPU + GPU + ANE power, as root), and a
battery's rail on Linux or Android (sysfs `power_now`, or `current_now` x `voltage_now`, only while it
discharges: on a charger the battery's flow is not the system's draw).

A sampler reads the source in a thread every `interval_s` (a streaming tool: at every line it prints)
between `start` and `stop`. The energy is the average power over the samples (the trapezoid over their
monotonic times, divided by the time they span) times the whole stretch; the share of the stretch the
samples span is kept beside it, so a short stretch with few samples says how little it saw.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fleetbench.energy.tegrastats import input_watts

INTERVAL_S = 0.1
POWER_SUPPLY = Path("/sys/class/power_supply")
ADB_BATTERY = "/sys/class/power_supply/battery"
PM_COMBINED = re.compile(r"^Combined Power \(CPU \+ GPU(?: \+ ANE)?\):\s*(\d{1,9}(?:\.\d{1,6})?)\s*mW", re.MULTILINE)
STREAMS: dict[str, list[str]] = {
    "tegrastats": ["tegrastats", "--interval", str(int(INTERVAL_S * 1000))],
    # without root it refuses ("must be invoked as the superuser"): the reason says so
    "powermetrics": ["powermetrics", "--samplers", "cpu_power,gpu_power", "-i", str(int(INTERVAL_S * 1000))],
}
SAMPLED_SOURCES = ("tegrastats", "powermetrics", "battery", "adb")


def powermetrics_watts(line: str) -> float | None:
    """The combined power of one powermetrics line, in watts; None for other lines."""
    match = PM_COMBINED.search(line)
    return float(match.group(1)) / 1000 if match else None


def _sysfs_number(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def battery_watts(files: dict[str, str]) -> tuple[float | None, str | None]:
    """The power a battery gives out now from its power_supply files (name -> text), or (None, why).

    The kernel's units: power_now in µW, current_now in µA, voltage_now in µV; some drivers give the
    current a sign (negative while discharging), so its size is taken."""
    status = files.get("status", "").strip()
    if status and status != "Discharging":
        return None, f"the battery is {status.lower()}: on external power its flow is not the system's draw"
    try:
        if "power_now" in files:
            watts = abs(_sysfs_number(files["power_now"])) / 1e6
        elif "current_now" in files and "voltage_now" in files:
            watts = abs(_sysfs_number(files["current_now"]) * _sysfs_number(files["voltage_now"])) / 1e12
        else:
            return None, "the battery has neither power_now nor current_now and voltage_now"
    except ValueError:
        return None, "the battery's power_supply files hold no finite number"
    if not math.isfinite(watts):
        return None, "the battery's power_supply files hold no finite number"
    return watts, None


def read_battery(root: Path = POWER_SUPPLY) -> tuple[float | None, str | None]:
    """The first battery's power now on this Linux machine, or (None, why)."""
    batteries = sorted(p for p in root.glob("*") if _read(p / "type") == "Battery") if root.is_dir() else []
    if not batteries:
        return None, f"no battery under {root}"
    names = ("status", "power_now", "current_now", "voltage_now")
    return battery_watts({n: text for n in names if (text := _read(batteries[0] / n)) is not None})


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def read_adb_battery() -> tuple[float | None, str | None]:
    """An Android device's battery power now, over `adb shell` (one call per sample), or (None, why)."""
    if shutil.which("adb") is None:
        return None, "adb not on PATH"
    names = ("status", "current_now", "voltage_now")
    script = "; ".join(f"echo {n}=$(cat {ADB_BATTERY}/{n} 2>/dev/null)" for n in names)
    try:
        done = subprocess.run(["adb", "shell", script], capture_output=True, text=True, timeout=5, errors="replace")
    except (subprocess.TimeoutExpired, OSError) as exc:
        return None, f"adb shell did not answer ({exc})"
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[0]
        return None, f"adb shell failed: {first}"
    files = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return battery_watts({k: v for k, v in files.items() if v.strip()})


POLLED: dict[str, Callable[[], tuple[float | None, str | None]]] = {"battery": read_battery, "adb": read_adb_battery}


@dataclass
class PowerSampler:
    """Power samples of one source between start and stop, in a thread; joules by the trapezoid."""

    source: str
    interval_s: float = INTERVAL_S
    samples: list[tuple[float, float]] = field(default_factory=list)  # (monotonic s, watts)
    reason: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _proc: subprocess.Popen[str] | None = None
    _started: float = 0.0

    def start(self) -> PowerSampler:
        """Begin sampling; a source that cannot start keeps the reason and no thread."""
        self._started = time.monotonic()
        if self.source in STREAMS:
            argv = STREAMS[self.source]
            if shutil.which(argv[0]) is None:
                self.reason = f"{argv[0]} not on PATH"
                return self
            try:
                # its own process group: a wrapper script's children are stopped with it
                self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                              errors="replace", start_new_session=True)  # fmt: skip
            except OSError as exc:
                self.reason = f"{argv[0]} could not run: {exc.strerror}"
                return self
            self._thread = threading.Thread(target=self._read_stream, daemon=True)
        else:
            watts, why = POLLED[self.source]()
            if watts is None:
                self.reason = why
                return self
            self.samples.append((time.monotonic(), watts))
            self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _read_stream(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        parse = input_watts if self.source == "tegrastats" else powermetrics_watts
        for line in self._proc.stdout:
            watts = parse(line)
            if watts is not None:
                self.samples.append((time.monotonic(), watts))
            if self._stop.is_set():
                break

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            watts, why = POLLED[self.source]()
            if watts is None:
                self.reason = why
                return
            self.samples.append((time.monotonic(), watts))

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def stop(self, seconds: float | None = None) -> tuple[float | None, float, str | None]:
        """(joules over the stretch of `seconds` (default: since start), the share of it the samples span,
        why when there is no figure)."""
        self._stop.set()
        seconds = time.monotonic() - self._started if seconds is None else seconds
        if self._proc is not None:
            self._signal(signal.SIGTERM)
            try:
                _, err = self._proc.communicate(timeout=2)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                _, err = self._proc.communicate()
            if not self.samples and self.reason is None:
                said = (err or "").strip().splitlines()
                self.reason = f"{self.source} printed no power line" + (f" ({said[0]})" if said else "")
        if self._thread is not None:
            self._thread.join(timeout=2)
        if len(self.samples) < 2:
            return None, 0.0, self.reason or f"{self.source}: fewer than two power samples in {seconds:.2f} s"
        times = [t for t, _ in self.samples]
        watts = [w for _, w in self.samples]
        span = times[-1] - times[0]
        if span <= 0:
            return None, 0.0, f"{self.source}: its power samples span no time"
        area = sum(
            (t1 - t0) * (w0 + w1) / 2 for t0, t1, w0, w1 in zip(times, times[1:], watts, watts[1:], strict=False)
        )
        return area / span * seconds, min(1.0, span / seconds), None
