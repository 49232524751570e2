"""Figures compare can judge: finite, and not negative where the quantity cannot be.

A run whose headline holds NaN, an infinity, a negative time, size, rate or ratio, a figure beyond
MAX_FIGURE or a denormal measured nothing
that a verdict could rest on; compare and `baseline set` refuse it with one line naming the run, the
benchmark, the figure and the value, instead of calling it "no significant change" (or writing a
baseline that no reader accepts). Every headline quantity of the catalogue is non-negative: times,
bytes, FLOP/s, bytes/s, ratios, token rates and the (cross-entropy) loss.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from fleetbench.errors import UserError
from fleetbench.results.record import HeadlineFigure, ResultRecord

# Beyond this no catalogue quantity is a measurement (1e30 FLOP/s is a million zettaFLOP/s), and the
# statistics' squares and ratios of such figures overflow; a denormal is no measurement either, and its
# ratios overflow the other way.
MAX_FIGURE = 1e30
ACCEPTED = f"a finite number >= 0, at most {MAX_FIGURE:.0e}, not a denormal"


def is_measurement(value: float) -> bool:
    """Whether `value` is a figure compare can judge (see ACCEPTED): False for NaN too."""
    return value == 0 or sys.float_info.min <= value <= MAX_FIGURE


def bad_value(figure: HeadlineFigure) -> tuple[float, str] | None:
    """The figure's first value or sample that is no measurement (is_measurement), and where; None when all are."""
    for index, value in enumerate((figure.value, *figure.samples)):
        if not is_measurement(value):
            return value, "" if index == 0 else f" in sample {index} of {len(figure.samples)}"
    return None


def figure_name(benchmark: str, figure: HeadlineFigure) -> str:
    """`benchmark metric{k=v,...}`, as the gate names figures."""
    labels = ",".join(f"{k}={v}" for k, v in sorted(figure.labels.items()))
    return f"{benchmark} {figure.metric}{{{labels}}}" if labels else f"{benchmark} {figure.metric}"


def check_records(label: str, records: Iterable[ResultRecord]) -> None:
    """Refuse the run `label` when a successful record holds a figure that is not a measurement."""
    for record in records:
        if record.status != "ok":
            continue  # a failed record's figures are not compared; its failure is
        for figure in record.headline:
            bad = bad_value(figure)
            if bad is not None:
                value, where = bad
                raise UserError(
                    f"{label}: run {record.run_id} {figure_name(record.benchmark, figure)} has the value "
                    f"{value!r}{where}; accepted: {ACCEPTED}. The run measured nothing to judge: run it again"
                )
