"""Slurm: training jobs submitted with sbatch (through the controller over SSH, or on a login node),
followed, collected and cancelled; and the Slurm exporter the slurm role runs beside slurmctld."""
