"""Draw one panel's data as a PNG with matplotlib, in the panel's unit."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.ticker import EngFormatter, Formatter, FuncFormatter, PercentFormatter

from fleetbench.report.sources import PanelData

# Grafana unit -> how to print a value of it.
ENG_UNITS = {"s": "s", "bytes": "B", "flops": "FLOP/s", "Bps": "B/s", "watt": "W", "celsius": "°C"}


def format_value(value: float, unit: str) -> str:
    """`value` as Grafana would show it in `unit` (percent, UTC date from milliseconds, SI prefixes)."""
    if unit == "percentunit":
        return f"{value:.1%}"
    if unit.startswith("dateTime"):
        return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if unit in ENG_UNITS:
        return str(EngFormatter(unit=ENG_UNITS[unit], places=2)(value))
    return f"{value:.4g}"


def _axis_formatter(unit: str) -> Formatter:
    if unit == "percentunit":
        return PercentFormatter(xmax=1.0)
    if unit in ENG_UNITS:
        return EngFormatter(unit=ENG_UNITS[unit])
    return FuncFormatter(lambda v, _pos: format_value(v, unit))


def draw(data: PanelData, path: Path) -> Path:
    """Write the panel as a PNG at `path` (lines over time, one big number, a table or bars) and return `path`."""
    panel = data.panel
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
    ax.set_title(panel.title, fontsize=11, loc="left")
    if not data.series:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_axis_off()
    elif panel.kind == "timeseries":
        for series in data.series[:12]:
            times = mdates.date2num([datetime.fromtimestamp(t, UTC) for t, _ in series.points])  # type: ignore[no-untyped-call]  # unannotated in matplotlib
            ax.plot(times, [v for _, v in series.points], marker="." if len(times) < 20 else None, label=series.name)
        ax.yaxis.set_major_formatter(_axis_formatter(panel.unit))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]  # unannotated in matplotlib
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.legend(fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    elif panel.kind == "stat" and len(data.series) == 1:
        ax.text(
            0.5,
            0.45,
            format_value(data.series[0].last, panel.unit),
            ha="center",
            va="center",
            fontsize=28,
            transform=ax.transAxes,
        )
        ax.set_axis_off()
    elif panel.kind == "table":
        rows = [[s.name, format_value(s.last, panel.unit)] for s in data.series[:14]]
        table = ax.table(cellText=rows, colLabels=["series", "value"], loc="center", cellLoc="left")
        table.auto_set_font_size(False)
        table.set_fontsize(8)
        table.scale(1, 1.2)
        ax.set_axis_off()
    else:  # stat with several series, bar charts and bar gauges: horizontal bars
        shown = data.series[:16]
        ax.barh([s.name for s in shown], [s.last for s in shown], color="#3274d9")
        ax.xaxis.set_major_formatter(_axis_formatter(panel.unit))
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
