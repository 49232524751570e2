"""`fleetbench train`: the FSDP2 training benchmark (torchrun launcher, trainer, MFU, checkpoints).

Importing this package is cheap: `config` has no torch import, so the CLI and the config schema can
read TrainConfig without loading torch. The trainer modules import torch themselves.
"""
