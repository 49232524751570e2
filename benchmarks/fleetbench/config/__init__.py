"""Validated configuration: every job's configuration lives in this package, one module per section.

A config file (YAML or TOML) has one top-level key per section; `loader.load_config` reads it,
applies `--set SECTION.KEY=VALUE` overrides and then the commands' flags, and validates the result
against `schema.FleetbenchConfig`. No section is defined outside `fleetbench/config/`: a new job
adds its module here and its field to `FleetbenchConfig`.

| section     | module           | what it configures                                              |
|-------------|------------------|-----------------------------------------------------------------|
| `run`       | `config.run`     | results root and run id, shared by every command                |
| `telemetry` | `config.run`     | Pushgateway, spool, textfile collector, /metrics over HTTP      |
| `probe`     | `config.probe`   | `fleetbench probe`: timed matmul and copy bandwidth             |
| `train`     | `config.train`   | `fleetbench train`: FSDP2 trainer, launch, checkpoints; presets |
| `profile`   | `config.profile` | `fleetbench profile` / `ncu` / `roofline`, class thresholds     |
| `edge`      | `config.edge`    | `fleetbench edge`: wgpu kernels, MPS, ExecuTorch programs       |
| `compare`   | `config.compare` | `fleetbench compare`: how strict it is, when it fails a CI job  |
| `trace`     | `config.trace`   | `fleetbench trace`: which kernels and events are communication  |
| `collectives` | `config.collectives` | `fleetbench collectives`: operations, sizes, iterations, launch |

`config.strict` holds StrictModel, the base of every section (unknown keys are errors);
`config.schema` the root model. docs/configuration.md has the precedence and an example per job.
No module here imports torch: the CLI validates a config before any job loads it.
"""

from fleetbench.config.edge import EdgeConfig
from fleetbench.config.loader import load_config
from fleetbench.config.probe import ProbeConfig
from fleetbench.config.profile import ProfileConfig
from fleetbench.config.run import RunConfig, TelemetryConfig
from fleetbench.config.schema import FleetbenchConfig
from fleetbench.config.train import TrainConfig

__all__ = [
    "EdgeConfig",
    "FleetbenchConfig",
    "ProbeConfig",
    "ProfileConfig",
    "RunConfig",
    "TelemetryConfig",
    "TrainConfig",
    "load_config",
]
