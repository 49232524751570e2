"""How rank-0/rank-1 here were captured: FSDP2 on 2 gloo CPU ranks under torch.profiler.

Run from this folder: `torchrun --nproc_per_node 2 capture.py .` (torch 2.13.0+cpu). Three MLP blocks,
each its own FSDP2 unit, AdamW; steps 0-1 wait and warm up, steps 2-4 are recorded, each rank's
trace written as Holistic Trace Analysis expects (`rank-<N>.*.pt.trace.json.gz`).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.profiler import ProfilerActivity, profile, schedule


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)) for _ in range(3)])
    for block in model:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def write(prof: profile) -> None:
        prof.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.fsdp2.pt.trace.json.gz"))

    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3), on_trace_ready=write
    ) as prof:
        for _ in range(5):
            loss = model(torch.randn(64, 256)).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
