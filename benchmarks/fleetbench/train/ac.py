"""Activation checkpointing of a block: full (recompute the whole block in backward) or selective op-level.

Selective op-level is torchtitan's policy (`activation_checkpoint.mode="selective"`,
`selective_ac_option="op"`): inside a checkpointed block the outputs of the expensive ops are saved
(matmuls and the other compute-intensive ops, attention kernels, float8's amax, the reduce-scatter) and everything else
(norms, activations, elementwise ops) is recomputed; of the matmuls every second one is recomputed, so
about half the matmul activations are kept. It trades less memory than full checkpointing for less
recomputation. Built on torch.utils.checkpoint's `create_selective_checkpoint_contexts`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Literal, cast

import torch
from torch.utils.checkpoint import checkpoint

AcPolicy = Literal["full", "selective_op"]


def _save_list() -> set[Any]:
    """The ops whose outputs selective op-level checkpointing keeps: torchtitan 0.3.0's list (its
    `_get_default_save_ops`): torch's compute-intensive ops, attention, float8's amax, linear, the
    reduce-scatter; those this torch lacks are skipped."""
    from torch._functorch.partitioners import get_default_op_list

    ops: set[Any] = {cast(Any, op).default for op in get_default_op_list().compute_intensive_ops}
    for path in (
        "aten._scaled_dot_product_cudnn_attention.default",
        "aten._scaled_dot_product_attention_math.default",
        "aten._scaled_dot_product_fused_attention_overrideable.default",
        "aten.max.default",  # float8: the amax a scale is computed from
        "aten.linear.default",
        "aten.topk.default",
        "_c10d_functional.reduce_scatter_tensor.default",
        "_c10d_functional.all_to_all_single.default",
    ):
        found: Any = torch.ops
        try:
            for part in path.split("."):
                found = getattr(found, part)
        except (AttributeError, RuntimeError):
            continue
        ops.add(found)
    return ops


def op_sac_context() -> Any:
    """A fresh pair of checkpoint contexts with the op-level policy (one per checkpointed call)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = _save_list()
    mm_ops = (torch.ops.aten.mm.default, torch.ops.aten.linear.default)
    counts: dict[str, int] = defaultdict(int)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        mode = "recompute" if ctx.is_recompute else "forward"
        if func in mm_ops:
            counts[mode] += 1
        # every second matmul is recomputed: the same ones in the forward and in its recomputation
        keep = func in save and not (func in mm_ops and counts[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)  # type: ignore[no-untyped-call]


def checkpointed(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, policy: str) -> torch.Tensor:
    """`forward(x)` under activation checkpointing with `policy` (full or selective_op)."""
    if policy == "selective_op":
        out: torch.Tensor = checkpoint(forward, x, use_reentrant=False, context_fn=op_sac_context)
    else:
        out = checkpoint(forward, x, use_reentrant=False)
    return out
