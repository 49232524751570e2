"""Board power from tegrastats: the input rail (`VDD_IN` on Xavier and Orin, `POM_5V_IN` on Nano and TX2),
printed as `current/average` in milliwatts (`VDD_IN 5542mW/5542mW`, `POM_5V_IN 1537/1228`)."""

from __future__ import annotations

import re

INPUT_RAIL = re.compile(r"\b(?:VDD_IN|POM_5V_IN)\s+(\d{1,9})(?:mW)?/(\d{1,9})(?:mW)?\b")


def input_watts(line: str) -> float | None:
    """The board's input power now, in watts; None when the line names no input rail."""
    match = INPUT_RAIL.search(line)
    return int(match.group(1)) / 1000 if match else None


def joules(lines: list[str], interval_s: float) -> float | None:
    """Energy over consecutive tegrastats lines `interval_s` apart (its --interval): the trapezoid of the
    input power; None with fewer than two readings."""
    # scipy is in the analysis extras, not in the trainer's image, which meters its steps through this package
    import numpy as np
    from scipy.integrate import trapezoid

    watts = [w for w in (input_watts(line) for line in lines) if w is not None]
    if len(watts) < 2:
        return None
    return float(trapezoid(np.asarray(watts), dx=interval_s))
