"""Options shared by every benchmark command: config file, overrides, run id, results dir, Pushgateway."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from fleetbench.config.loader import load_config
from fleetbench.config.schema import FleetbenchConfig


def add_run_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run and telemetry")
    group.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML or TOML config (sections: run, telemetry, ...)"
    )
    group.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key, e.g. --set probe.matmul_sizes=[256,512] (repeatable)",
    )
    group.add_argument("--run-id", help="name of the run folder and the run_id label (default: UTC time + random)")
    group.add_argument("--results-dir", type=Path, help="results root (default: results)")
    group.add_argument(
        "--pushgateway", metavar="URL", help="Pushgateway to push to (default: $FLEETBENCH_PUSHGATEWAY; unset: no push)"
    )


def config_from_args(
    args: argparse.Namespace, extra_flags: dict[str, tuple[Any, str]] | None = None
) -> FleetbenchConfig:
    flags: dict[str, tuple[Any, str]] = {
        "run.run_id": (args.run_id, "--run-id"),
        "run.results_dir": (str(args.results_dir) if args.results_dir else None, "--results-dir"),
        "telemetry.pushgateway": (
            args.pushgateway or os.environ.get("FLEETBENCH_PUSHGATEWAY") or None,
            "--pushgateway" if args.pushgateway else "FLEETBENCH_PUSHGATEWAY",
        ),
        **(extra_flags or {}),
    }
    config: FleetbenchConfig = load_config(args.config, args.overrides, flags)
    return config
