"""Which device events and host ops are communication: by what they do, not by one substring.

HTA 0.5 (hta/utils/utils.py `is_comm_kernel`) counts a kernel as communication when its name
matches `^nccl.*Kernel`, nothing else. That misses every collective library that is not NCCL: on an H800 MoE trace
DeepEP's dispatch/combine kernels were 46.5 % of kernel time and counted as compute. The table
below names each family by its kernels' names (regular expressions, searched case-insensitively):

| rule             | what it catches (examples of kernel names)                                         |
|------------------|------------------------------------------------------------------------------------|
| nccl             | NCCL and RCCL: `ncclDevKernel_AllReduce_Sum_bf16_RING_LL`, `ncclKernel_SendRecv_*`, `rccl*` |
| deepep           | DeepEP expert-parallel all-to-all: `deep_ep::intranode::dispatch<…>`, `deep_ep::internode_ll::combine<…>`, `notify_dispatch` |
| all_to_all       | other all-to-all / MoE dispatch-combine kernels: `all_to_all`, `alltoall`, `pplx::…dispatch/combine`, `moe_a2a` |
| nvshmem          | NVSHMEM and multimem (NVLink SHARP) kernels: `nvshmemi_*`, `multimem_all_reduce_kernel`, PyTorch SymmetricMemory `one_shot_all_reduce`, `two_shot_all_reduce` |
| custom_allreduce | custom all-reduce of serving engines: vLLM / SGLang `cross_device_reduce_1stage<…>`, TensorRT-LLM `oneShotAllReduceKernel`, `twoShotAllReduceKernel`, `allreduce_fusion_kernel`, `lamport…AllReduce`, FlashInfer `trtllm_allreduce`, MSCCL++ `mscclpp`, TransformerEngine `userbuffers` |
| collective_args  | any event whose args carry what PyTorch's `record_param_comms` writes for a collective (`Collective name`, `In msg nelems`, `Out msg nelems`) |

On the host side (CPU-only traces, gloo or MPI ranks) a collective is an op or annotation whose
name starts with `gloo:`, `nccl:`, `mpi:`, `c10d::`, `c10d_functional::` or `record_param_comms`,
or whose args are the collective args above.

`mode="hta"` keeps HTA's rule (`^nccl.*Kernel`, case-sensitive) so figures can be put beside HTA's; the
default, `fleetbench`, is the table. `extra` rules (config `trace.comm_patterns`: rule name ->
regular expression) are added to the table; one with a table rule's name replaces that rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

CommMode = Literal["fleetbench", "hta"]
COMM_MODES: tuple[CommMode, ...] = ("fleetbench", "hta")

KERNEL_RULES: dict[str, str] = {
    "nccl": r"nccl|rccl",
    "deepep": r"deep_?ep|notify_dispatch|cached_notify",
    "all_to_all": r"all_?to_?all|\ba2a|moe_a2a|pplx.*(dispatch|combine)",
    "nvshmem": r"nvshmem|multimem",
    "custom_allreduce": (
        r"cross_device_reduce|one_?shot_?all_?reduce|two_?shot_?all_?reduce|allreduce_?fusion|"
        r"lamport.*all_?reduce|trtllm_?all_?reduce|custom_?all_?reduce|mscclpp|userbuffers"
    ),
}
HTA_RULE = ("nccl (HTA)", "^nccl.*Kernel")  # HTA 0.5 (hta/utils/utils.py NCCL_KERNEL_RE), case-sensitive
# What record_param_comms (torch/csrc/distributed/c10d/ParamCommsUtils.hpp) writes on a collective.
COLLECTIVE_ARGS = ("Collective name", "In msg nelems", "Out msg nelems")
HOST_COLLECTIVE = re.compile(r"^(gloo:|nccl:|mpi:|c10d::|_?c10d_functional::|record_param_comms)")


def check_pattern(name: str, pattern: str) -> str:
    """`pattern` when it compiles; ValueError naming the rule otherwise (config validation uses it)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"trace.comm_patterns.{name}: {pattern!r} is not a regular expression ({exc})") from None
    return pattern


@dataclass
class CommRules:
    """The communication rules a summary applies; `matched` counts kernels and time per rule it used."""

    mode: CommMode = "fleetbench"
    extra: Mapping[str, str] = field(default_factory=dict)
    _kernel: list[tuple[str, re.Pattern[str]]] = field(init=False, repr=False)
    _cache: dict[str, str | None] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode == "hta":
            self._kernel = [(HTA_RULE[0], re.compile(HTA_RULE[1]))]
            return
        rules = {**KERNEL_RULES, **{k: check_pattern(k, v) for k, v in self.extra.items()}}
        self._kernel = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in rules.items()]

    @property
    def description(self) -> str:
        """One line: which rule set decides what is communication."""
        if self.mode == "hta":
            return "communication: HTA's rule (a kernel name matching ^nccl.*Kernel)"
        names = ", ".join(name for name, _ in self._kernel)
        return f"communication: kernels by what they do ({names}) and collective args (docs/trace.md)"

    def kernel_rule(self, name: str, collective_args: bool = False) -> str | None:
        """The rule that makes a device event of this name communication (also when its args carry
        record_param_comms' fields, outside HTA's mode); None: it is not communication."""
        found = self._cache.get(name, "")
        if found == "":
            found = self._cache[name] = next((rule for rule, pattern in self._kernel if pattern.search(name)), None)
        if found is None and collective_args and self.mode != "hta":
            return "collective_args"
        return found


def is_host_collective(name: str, args: dict[str, Any] | None = None) -> bool:
    """Whether a CPU op or annotation is (the host side of) a collective: by name or by its args."""
    if HOST_COLLECTIVE.match(name) is not None:
        return True
    return args is not None and any(key in args for key in COLLECTIVE_ARGS)
