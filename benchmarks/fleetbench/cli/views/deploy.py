"""What `fleetbench deploy` shows: a live per-host table while Ansible runs, the counts at the end."""

from __future__ import annotations

from rich.table import Table

from fleetbench.deploy.launcher import STAT_KEYS, DeployProgress, DeployResult


def progress_table(progress: DeployProgress) -> Table:
    """The live table: one row per host with its counts and last task."""

    table = Table(title=f"task: {progress.task}" if progress.task else None)
    for column in ("host", "ok", "changed", "failed", "unreachable", "last task"):
        table.add_column(column)
    for host, p in sorted(progress.hosts.items()):
        table.add_row(host, str(p.ok), str(p.changed), str(p.failed), str(p.unreachable), p.last)
    return table


def summary_table(result: DeployResult) -> Table:
    """The closing per-host table of ok, changed, failed, unreachable and skipped counts."""
    table = Table(title=f"deploy: {result.status} (rc {result.rc})")
    for column in ("host", *STAT_KEYS.values()):
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, counts in sorted(result.hosts.items()):
        style = "red" if counts["failed"] or counts["unreachable"] else None
        table.add_row(host, *(str(counts[c]) for c in STAT_KEYS.values()), style=style)
    return table
