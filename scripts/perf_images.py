"""`make perf` row set for the container images: sizes of the cpu variants against their budgets, and
the rebuild after a one-line code change as a ratio of a cold build.

Cold means cold: a local base is made from scratch (debootstrap + import) in a namespace of this run
(`fbperf<pid>/...`), so no layer above it can come from an earlier build's cache; the namespace is
removed at the end. Takes about 4 minutes on 2 cores. Needs a Docker engine (scripts/dockerd.sh).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import perfkit
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = f"fbperf{os.getpid()}"
REBUILDS = perfkit.rounds(full=3, quick=2)
REBUILD_TARGET = "<= 0.25"  # a one-line change rebuilds only the package's layer
CHANGED_FILE = "benchmarks/fleetbench/__init__.py"

console = Console()


def main() -> int:
    if perfkit.QUICK:  # a cold base and two cold builds take 6-7 minutes on 2 cores: more than `make perf`'s budget
        reason = "cold builds take 6-7 minutes on 2 cores: run `python scripts/perf_images.py` for these rows"
        perfkit.emit(perfkit.skipped("images: rebuild / cold build, trainer (cpu)", REBUILD_TARGET, reason))
        return 0
    started = subprocess.run(["bash", str(REPO / "scripts/dockerd.sh")], capture_output=True, text=True)
    if started.returncode != 0:
        reason = f"no Docker engine could start ({' '.join(started.stderr.split())[-300:]})"
        console.print(f"image rows skipped: {reason}")
        perfkit.emit(perfkit.skipped("images: rebuild / cold build, trainer (cpu)", REBUILD_TARGET, reason))
        return 0
    from fleetbench.images.base import NAMESPACE_LABEL, ensure_base
    from fleetbench.images.build import build_images
    from fleetbench.images.engine import connect

    client = connect(timeout_s=900)
    try:
        console.print(
            f"measuring: local base from scratch, then cold builds of trainer and edge-vulkan ({NAMESPACE}) ..."
        )
        t0 = time.monotonic()
        ensure_base(client, NAMESPACE, REPO / "build", rebuild=True)
        base_s = time.monotonic() - t0
        cold = {
            r.name: r
            for r in build_images(["trainer", "edge-vulkan"], "cpu", context=REPO, namespace=NAMESPACE, client=client)
        }
        source = (REPO / CHANGED_FILE).read_text()
        rebuilds = []
        for index in range(REBUILDS):
            console.print(f"measuring: trainer rebuild {index + 1}/{REBUILDS} after a one-line change ...")
            (result,) = build_images(
                ["trainer"],
                "cpu",
                context=REPO,
                namespace=NAMESPACE,
                client=client,
                extra_files={CHANGED_FILE: source + f"# perf rebuild {index}\n"},
            )
            rebuilds.append(result.seconds)
    finally:
        for image in client.images.list():
            for tag in image.tags:
                if tag.startswith(f"{NAMESPACE}/"):
                    client.images.remove(tag, force=True)
        client.images.prune(filters={"dangling": True, "label": f"{NAMESPACE_LABEL}={NAMESPACE}"})

    table = Table(title="container images (cpu variants; ratios: lower is better)")
    table.add_column("row")
    table.add_column("ratio", justify="right")
    table.add_column("detail")
    for name, result in cold.items():
        budget = result.budget_mb or 0
        table.add_row(
            f"image size, {name} (cpu)",
            f"{result.size_bytes / 1e6 / budget:.3f}" if budget else "-",
            f"{result.size_bytes / 1e6:.0f} MB of a {budget} MB budget; cold build {result.seconds:.0f} s"
            + (" (after the trainer: shares its Python stages)" if name == "edge-vulkan" else ""),
        )
        if budget:
            perfkit.emit(
                perfkit.judged(
                    f"images: {name} (cpu) size / budget",
                    result.size_bytes / 1e6 / budget,
                    "<= 1",
                    f"{result.size_bytes / 1e6:.0f} MB of {budget} MB",
                )
            )
    trainer = cold["trainer"]
    median = statistics.median(rebuilds)
    table.add_row(
        "rebuild after a one-line change / cold build, trainer (cpu)",
        f"{median / trainer.seconds:.3f}",
        f"{median:.1f} s (median of {REBUILDS}: {', '.join(f'{s:.1f}' for s in rebuilds)}) vs {trainer.seconds:.0f} s cold; "
        f"local base {base_s:.0f} s",
    )
    console.print(table)
    perfkit.emit(
        perfkit.judged(
            "images: rebuild / cold build, trainer (cpu)",
            median / trainer.seconds,
            REBUILD_TARGET,
            f"{median:.1f} s vs {trainer.seconds:.0f} s cold, median of {REBUILDS} rebuilds",
            samples=[s / trainer.seconds for s in rebuilds] if len(rebuilds) >= 3 else None,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
