"""How a logged training step reads: the cells of the live table's row, and the line of a log."""

from __future__ import annotations

from fleetbench.train.history import StepRow

COLUMNS = ("step", "loss", "grad norm", "step ms", "data ms", "tok/s", "tok/s/dev", "TFLOP/s/dev", "MFU", "peak mem")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def cells(row: StepRow) -> tuple[str, ...]:
    """One row of the live table, in COLUMNS order."""
    return (
        str(row.step),
        f"{row.loss:.4f}",
        f"{row.grad_norm:.3f}",
        f"{row.step_s * 1e3:.1f}",
        f"{row.data_s * 1e3:.2f}",
        f"{row.tokens_per_s:,.0f}",
        f"{row.device_tokens_per_s:,.0f}",
        f"{row.tflops_per_device:.3f}",
        "-" if row.mfu is None else f"{row.mfu:.1%}",
        _gib(row.peak_memory_bytes),
    )


def line(row: StepRow, total: int) -> str:
    """One logged step as a line, where no live table is drawn (logs, CI)."""
    mfu = "-" if row.mfu is None else f"{row.mfu:.1%}"
    return (
        f"Step {row.step}/{total} | Loss {row.loss:.4f} | grad {row.grad_norm:.3f} | "
        f"{row.step_s * 1e3:.1f} ms | {row.tokens_per_s:,.0f} tok/s ({row.device_tokens_per_s:,.0f}/dev) | "
        f"MFU {mfu} | Peak mem/rank {_gib(row.peak_memory_bytes)}"
    )
