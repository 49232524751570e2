"""The step's timeline, one lane per CPU thread and GPU stream, with its critical path drawn over it."""

from __future__ import annotations

from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.fsutil import atomic_path
from fleetbench.profile.trace.critical import CriticalPath

COLOURS = {
    "cpu_op": "tab:blue",
    "runtime": "tab:cyan",
    "launch_delay": "tab:orange",
    "kernel": "tab:green",
    "communication": "tab:purple",
    "memory": "tab:olive",
    "kernel_gap": "tab:red",
}


def draw_critical_path(result: CriticalPath, path: Path) -> Path:
    """Every event of the step in grey on its lane; the path's edges over it, coloured by kind; a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    lanes = sorted({lane for lane, _, _ in result.spans} | {e.lane for e in result.edges})
    row = {lane: index for index, lane in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * len(lanes)), dpi=120)
    for lane, start, end in result.spans:
        ax.broken_barh([(start * 1e3, (end - start) * 1e3)], (row[lane] - 0.3, 0.6), color="0.85", linewidth=0)
    for edge in result.edges:
        if edge.duration_s <= 0 or edge.kind not in COLOURS:
            continue
        ax.broken_barh(
            [(edge.start_s * 1e3, edge.duration_s * 1e3)], (row[edge.lane] - 0.2, 0.4), color=COLOURS[edge.kind]
        )
    ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"milliseconds from the start of {result.step}")
    ax.set_title(f"critical path of {result.step}, rank {result.rank}: {result.length_s * 1e3:.3f} ms", fontsize=9)
    used = [kind for kind in COLOURS if result.by_kind.get(kind, 0.0) > 0]
    ax.legend(
        handles=[Patch(color=COLOURS[k], label=k) for k in used],
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    fig.tight_layout()
    try:
        with atomic_path(path, "critical path chart") as tmp:  # a failed write leaves no half PNG
            fig.savefig(tmp, format="png")
    except UserError as exc:
        raise UserError(f"{exc}; pass another --png") from None
    finally:
        plt.close(fig)
    return path
