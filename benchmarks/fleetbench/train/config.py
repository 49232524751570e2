"""Kept for the trainer's modules: re-exports `fleetbench.config.train` and `fleetbench.train.plan`."""

from fleetbench.config.train import ENDPOINT_PATTERN, PRESETS, TEXT_VOCAB, DataKind, Preset, PresetName, TrainConfig
from fleetbench.train.plan import ModelShape, TrainPlan, check_launch, check_plan, resolve_plan

__all__ = [
    "ENDPOINT_PATTERN",
    "PRESETS",
    "TEXT_VOCAB",
    "DataKind",
    "ModelShape",
    "Preset",
    "PresetName",
    "TrainConfig",
    "TrainPlan",
    "check_launch",
    "check_plan",
    "resolve_plan",
]
