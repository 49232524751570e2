"""The loss / throughput figure of a run, drawn from its step history into the run folder."""

from __future__ import annotations

from pathlib import Path

from fleetbench.train.history import StepRow

PLOT_FILE = "train_loss_throughput.png"


def plot_history(rows: list[StepRow], run_dir: Path, title: str) -> Path:
    """Loss and tokens/s (global and per device) over the steps, written as PLOT_FILE; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [row.step for row in rows]
    fig, (ax_loss, ax_tput) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax_loss.plot(steps, [row.loss for row in rows], marker="." if len(rows) < 50 else None)
    ax_loss.set_ylabel("loss")
    ax_loss.grid(alpha=0.3)
    ax_tput.plot(steps, [row.tokens_per_s for row in rows], label="global")
    ax_tput.plot(steps, [row.device_tokens_per_s for row in rows], label="per device")
    ax_tput.set_ylabel("tokens/s")
    ax_tput.set_xlabel("step")
    ax_tput.legend()
    ax_tput.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    target = run_dir / PLOT_FILE
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
