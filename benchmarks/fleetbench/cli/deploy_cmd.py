"""`fleetbench deploy PLAYBOOK --inventory DIR`: Ansible through ansible-runner, with live progress."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from fleetbench.cli.options import add_results_dir
from fleetbench.errors import UserError
from fleetbench.runinfo import validate_run_id


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `deploy PLAYBOOK --inventory DIR` and the ansible flags it passes through."""
    parser = commands.add_parser("deploy", help="run a playbook of deploy/ (site, monitoring, images, train, ...)")
    parser.add_argument("playbook", help="site, monitoring, images, train, profile, edge or collect")
    parser.add_argument("--inventory", "-i", type=Path, required=True, help="inventory folder or file")
    parser.add_argument("--check", action="store_true", help="dry run (ansible --check)")
    parser.add_argument("--extra-vars", "-e", action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    parser.add_argument("--limit", help="only these hosts or groups (ansible --limit)")
    parser.add_argument("--tags", help="only tasks with these tags (ansible --tags)")
    parser.add_argument("--skip-tags", help="e.g. fleetbench_job: re-check configuration without running jobs")
    parser.add_argument("--vault-password-file", type=Path, help="for ansible-vault encrypted group_vars")
    parser.add_argument("--run-id", help="run id (also passed as fleetbench_run_id; default: UTC time + random)")
    add_results_dir(parser)
    parser.set_defaults(handler=handle)


def parse_extra_vars(pairs: list[str]) -> dict[str, str]:
    """--extra-vars KEY=VALUE pairs as a dict (the value may be empty); anything else is a UserError."""
    extra = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--extra-vars {pair!r} is not accepted: use KEY=VALUE")
        extra[key.strip()] = value
    return extra


def handle(args: argparse.Namespace, console: Console) -> int:
    """Run the playbook under the run's folder; print the per-host table; exit 1 when a task failed."""
    from rich.live import Live

    from fleetbench.cli.views.deploy import progress_table, summary_table
    from fleetbench.deploy.launcher import DeployProgress, run_playbook
    from fleetbench.job import RunContext

    context = RunContext.new(validate_run_id(args.run_id) if args.run_id else None, args.results_dir)
    run_id = context.run_id
    extra = {
        "fleetbench_run_id": run_id,
        "fleetbench_controller_results_dir": str(args.results_dir.resolve()),  # where collect.yml fetches to
        **parse_extra_vars(args.extra_vars),
    }
    with Live(progress_table(DeployProgress()), console=console, refresh_per_second=4, transient=True) as live:
        result = run_playbook(
            args.playbook,
            args.inventory,
            context.folder("deploy"),
            watch=lambda progress: live.update(progress_table(progress)),
            check=args.check,
            extra_vars=extra,
            limit=args.limit,
            vault_password_file=args.vault_password_file,
            tags=args.tags,
            skip_tags=args.skip_tags,
        )
    console.print(summary_table(result))
    for failure in result.failures[:20]:
        console.print(f"[red]failed[/] {failure}")
    console.print(f"ansible-runner artifacts: {result.artifacts}")
    return 0 if result.ok else 1
