"""`fleetbench slurm collect`: a job's run folder from the shared results folder into results/ here.

The controller packs <results>/slurm-<job>/ (checkpoints left out unless asked for) and the batch
output with tar; the archive is unpacked here with tarfile's `data` filter (no absolute paths, no
links out of the folder), the batch output becoming slurm/batch.out of the run folder.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.slurm import queries
from fleetbench.slurm.controller import Controller
from fleetbench.slurm.script import batch_output


def collect(
    controller: Controller, job_id: int, results_dir: str, dest_root: Path, with_checkpoints: bool = False
) -> Path:
    """Copy the job's run folder (and its batch output) under `dest_root`; returns the local run folder."""
    run_id = queries.run_id_of(job_id)
    batch = batch_output(results_dir, job_id)
    members = [run_id, batch.removeprefix(f"{results_dir}/")]
    script = (
        'cd "$1" && shift && for m in "$@"; do [ -e "$m" ] && printf "%s\\0" "$m"; done '
        '| tar --create --file=- ${EXCLUDE:+--exclude="$EXCLUDE"} --null --files-from=-'
    )
    exclude = "" if with_checkpoints else f"{run_id}/checkpoints"
    done = controller.run(
        ["env", f"EXCLUDE={exclude}", "sh", "-c", script, "sh", results_dir, *members], timeout=600, binary=True
    )
    data = bytes(done.stdout)
    if done.returncode != 0 or not data:
        err = bytes(done.stderr).decode(errors="replace").strip().splitlines()
        raise UserError(
            f"nothing to collect for job {job_id} under {results_dir} on {controller.describe()}"
            + (f": {err[-1]}" if err else " (the job has not started, or its results are gone)")
        )
    staging = dest_root / f".{run_id}.collect"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            archive.extractall(staging, filter="data")
        run_dir = dest_root / run_id
        got = staging / run_id
        if got.is_dir():
            shutil.copytree(got, run_dir, dirs_exist_ok=True)
        fetched_batch = staging / members[1]
        if fetched_batch.is_file():
            (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fetched_batch, run_dir / "slurm" / "batch.out")
    except (OSError, tarfile.TarError) as exc:
        raise UserError(f"collecting job {job_id} into {dest_root} failed: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return run_dir
