"""`fleetbench slurm submit|status|wait|collect|cancel|info`: FSDP2 training jobs on a Slurm cluster.

Slurm's commands run on the inventory's controller over SSH (`--inventory`, default the local
cluster's), or here with `--local` on a login node.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from fleetbench.cli.options import add_results_dir
from fleetbench.errors import UserError
from fleetbench.fsutil import check_writable_dir, write_text_atomic

if TYPE_CHECKING:
    from fleetbench.slurm.controller import Controller
    from fleetbench.slurm.follow import Progress

DEFAULT_INVENTORY = Path(".fleetbench/cluster/inventory")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slurm` and its subcommands."""
    parser = commands.add_parser("slurm", help="training jobs on a Slurm cluster: submit, follow, collect, cancel")
    sub = parser.add_subparsers(dest="slurm_command", required=True, metavar="{submit,status,wait,collect,cancel,info}")

    submit = sub.add_parser("submit", help="render deploy/slurm/fleetbench-train.sbatch and sbatch it")
    submit.add_argument("--nodes", type=int, default=2, help="nodes, one task each (default 2)")
    submit.add_argument("--gpus-per-node", type=int, default=0, help="GPUs (ranks) per node; 0: 1 CPU rank, gloo")
    submit.add_argument("--preset", default="tiny", help="model preset (default tiny)")
    submit.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    submit.add_argument("--partition", help="partition (default: the cluster's default one)")
    submit.add_argument("--time", dest="time_limit", help="time limit, e.g. 30 or 02:00:00 (default: the partition's)")
    submit.add_argument("--cpus-per-task", type=int, help="CPUs of each node's task (default: Slurm's)")
    submit.add_argument("--checkpoint-every", type=int, default=0, help="distributed checkpoint every N steps")
    submit.add_argument(
        "--requeue", action="store_true", help="requeue after a node failure; resumes from the newest checkpoint"
    )
    submit.add_argument(
        "--no-collectives",
        dest="collectives",
        action="store_false",
        help="skip the collectives sweep over the job's nodes that runs before training",
    )
    submit.add_argument("--no-wait", action="store_true", help="print the job id and return")
    submit.add_argument("--timeout", type=_seconds, help="stop waiting after this many seconds (the job goes on)")
    submit.add_argument("--json", action="store_true", help="print the job as JSON on stdout at the end")
    submit.set_defaults(handler=handle_submit)

    for name, what, handler in (
        ("status", "a job's state (squeue, or the job completion log)", handle_status),
        ("wait", "follow a job live until it ends, then collect its results", handle_wait),
        ("collect", "copy a job's run folder into the results folder here", handle_collect),
        ("cancel", "scancel a job and wait until it has ended", handle_cancel),
    ):
        command = sub.add_parser(name, help=what)
        command.add_argument("job_id", metavar="JOBID")
        command.set_defaults(handler=handler)
        if name in {"status", "wait", "cancel"}:
            command.add_argument("--json", action="store_true", help="print the job as JSON on stdout")
        if name == "wait":
            command.add_argument("--timeout", type=_seconds, help="stop waiting after this many seconds")
        if name == "collect":
            command.add_argument("--with-checkpoints", action="store_true", help="the checkpoints too")
        _add_connection(command)
    info = sub.add_parser("info", help="the partitions and their nodes (sinfo)")
    info.add_argument("--json", action="store_true", help="print the nodes as JSON on stdout")
    info.set_defaults(handler=handle_info)
    _add_connection(info)
    _add_connection(submit)


def _seconds(text: str) -> float:
    """--timeout: a finite number of seconds above 0, checked before Slurm is contacted."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; accepted: seconds, a number above 0 (e.g. 600)")
    return value


def _add_connection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where Slurm is")
    group.add_argument(
        "--inventory",
        "-i",
        type=Path,
        default=DEFAULT_INVENTORY,
        help=f"its slurm_controller (default {DEFAULT_INVENTORY})",
    )
    group.add_argument("--local", action="store_true", help="run Slurm's commands here (a login node)")
    add_results_dir(group, "where collected runs go")


def _check_results_dir(args: argparse.Namespace) -> None:
    """Where the job's runs are collected to, refused before the controller is contacted (a job submitted,
    or followed for an hour, must not end in a folder that cannot take its results)."""

    check_writable_dir(args.results_dir, "results folder", "--results-dir")


def _controller(args: argparse.Namespace) -> Controller:
    from fleetbench.slurm import controller

    return controller.local() if args.local else controller.from_inventory(args.inventory)


def _print_json(value: object) -> None:
    from fleetbench import jsonio

    print(jsonio.dumps(value, indent=2))


def handle_submit(args: argparse.Namespace, console: Console) -> int:
    """Validate, sbatch, then (unless --no-wait) follow the job live, explain a failure and collect."""
    from fleetbench.cli.views.slurm import print_submitted
    from fleetbench.deploy.launcher import deploy_dir
    from fleetbench.slurm.script import JobRequest
    from fleetbench.slurm.submit import submit

    request = JobRequest(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        preset=args.preset,
        steps=args.steps,
        partition=args.partition,
        time_limit=args.time_limit,
        cpus_per_task=args.cpus_per_task,
        checkpoint_every=args.checkpoint_every,
        requeue=args.requeue,
        collectives=args.collectives,
    )
    request.validate()  # before the inventory is read: a bad option is refused at once
    _check_results_dir(args)
    controller = _controller(args)
    submitted = submit(controller, request, deploy_dir())
    # the job is queued: a failure to keep its script here is a warning, not the job's end
    try:
        write_text_atomic(args.results_dir / submitted.run_id / "slurm" / "job.sbatch", submitted.script, "job script")
    except UserError as exc:
        console.print(f"warning: {exc}", markup=False, highlight=False, soft_wrap=True)
    print_submitted(console, submitted.job_id, submitted.partition, controller.describe(), request.nodes)
    if args.no_wait:
        console.print(f"follow it: fleetbench slurm wait {submitted.job_id}", markup=False, highlight=False)
        if args.json:
            _print_json({"job_id": submitted.job_id, "run_id": submitted.run_id, "partition": submitted.partition})
        return 0
    return _follow(controller, submitted.job_id, submitted.settings["RESULTS_DIR"], args, console)


def _follow(controller: Controller, job_id: int, results_dir: str, args: argparse.Namespace, console: Console) -> int:
    """Live progress until the job ends; its failure explained; its results collected; 0 if it completed."""
    from rich.live import Live

    from fleetbench.cli.views.slurm import print_end, print_failure, progress_view
    from fleetbench.slurm import follow

    with Live(console=console, refresh_per_second=2, transient=True) as live:

        def show(progress: Progress) -> None:
            live.update(progress_view(progress))

        progress = follow.wait(controller, job_id, results_dir, show, timeout_s=args.timeout)
    print_end(console, progress)
    job = progress.job
    if job.state != "COMPLETED":
        print_failure(console, follow.explain(controller, job, results_dir))
    _collect(controller, job_id, results_dir, args.results_dir, console, with_checkpoints=False)
    if args.json:
        _print_json(job.to_json())
    return 0 if job.state == "COMPLETED" else 1


def _collect(
    controller: Controller, job_id: int, results_dir: str, dest: Path, console: Console, with_checkpoints: bool
) -> Path:
    from fleetbench.cli.views.slurm import print_collected
    from fleetbench.results.store import read_records
    from fleetbench.slurm.collect import collect

    run_dir = collect(controller, job_id, results_dir, dest, with_checkpoints)
    try:
        records = read_records(run_dir)
    except UserError as exc:
        console.print(f"records of {run_dir} do not read: {exc}", markup=False, highlight=False)
        records = []
    latest = {r.rank: r for r in records if r.benchmark == "train"}  # a requeued job's last attempt wins
    train = [latest[rank] for rank in sorted(latest)]
    losses = [(r.summary.get("first_loss"), r.summary.get("final_loss")) for r in train]
    print_collected(console, run_dir, [r.rank for r in train], losses)
    return run_dir


def _results_dir(controller: Controller) -> str:
    from fleetbench.slurm.queries import site_settings

    return site_settings(controller).get("RESULTS_DIR", "")


def handle_status(args: argparse.Namespace, console: Console) -> int:
    """Print the job's state (or its JSON); exit 0 whatever the state."""
    from fleetbench.slurm import follow

    job_id = follow.job_id_of(args.job_id)
    controller = _controller(args)
    job = follow.require(controller, job_id)
    if args.json:
        _print_json(job.to_json())
        return 0
    detail = f" ({job.reason})" if job.reason else ""
    exit_text = f", exit code {job.exit_code}" if job.exit_code is not None and job.final else ""
    console.print(
        f"job {job.job_id} {job.state}{detail} on {job.nodes or '-'}{exit_text}, restarts {job.restarts} "
        f"[from {job.source}]",
        markup=False,
        highlight=False,
    )
    return 0


def handle_wait(args: argparse.Namespace, console: Console) -> int:
    """Follow the job until it ends; 0 when it completed, 1 otherwise."""
    from fleetbench.slurm import follow

    job_id = follow.job_id_of(args.job_id)
    _check_results_dir(args)
    controller = _controller(args)
    follow.require(controller, job_id)
    return _follow(controller, job_id, _results_dir(controller), args, console)


def handle_collect(args: argparse.Namespace, console: Console) -> int:
    """Copy the job's run folder here."""
    from fleetbench.slurm import follow

    job_id = follow.job_id_of(args.job_id)
    _check_results_dir(args)
    controller = _controller(args)
    _collect(controller, job_id, _results_dir(controller), args.results_dir, console, args.with_checkpoints)
    return 0


def handle_cancel(args: argparse.Namespace, console: Console) -> int:
    """scancel the job and report how it ended."""
    from fleetbench.slurm import follow

    job_id = follow.job_id_of(args.job_id)
    controller = _controller(args)
    job = follow.cancel(controller, job_id)
    console.print(f"job {job_id} {job.state}", markup=False, highlight=False)
    if args.json:
        _print_json(job.to_json())
    return 0


def handle_info(args: argparse.Namespace, console: Console) -> int:
    """Print the partitions' nodes and their states."""
    from dataclasses import asdict

    from fleetbench.cli.views.slurm import nodes_table
    from fleetbench.slurm import queries

    nodes = queries.nodes(_controller(args))
    if args.json:
        _print_json([{**asdict(n), "usable": n.usable} for n in nodes])
        return 0
    console.print(nodes_table(nodes))
    return 0
