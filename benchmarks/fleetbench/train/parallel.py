"""Processes, devices and sharding: the torchrun environment, the process group, the device mesh, FSDP2.

Under torchrun every rank reads RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE; a plain process is a
world of one with an in-memory store. The device is cuda:LOCAL_RANK with NCCL when CUDA is there,
else the CPU with gloo (and an explicit CPU device mesh), each overridable.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from fleetbench import jsonio
from fleetbench.config.train import TrainConfig
from fleetbench.devices import DeviceInfo, cpu_model_name
from fleetbench.errors import UserError
from fleetbench.train.decoder import Block, TrainModel, build_decoder, init_weights
from fleetbench.train.float8 import apply_float8
from fleetbench.train.plan import TrainPlan

# CPU ranks per node: one per usable core, but at least this many, so the smallest 2 x 2 HSDP mesh
# runs on any machine (its ranks then share the cores: slower steps, the same results).
MIN_CPU_RANKS = 4


@dataclass(frozen=True)
class DistEnv:
    """This process's place in the job, from torchrun's environment variables."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    restart_count: int
    launched: bool  # started by torchrun (or another launcher setting the env contract)

    @classmethod
    def from_environ(cls) -> DistEnv:
        """Read RANK, WORLD_SIZE and the rest; without them, a world of one not started by a launcher."""
        env = os.environ
        if "WORLD_SIZE" not in env or "RANK" not in env:
            return cls(0, 1, 0, 1, 0, launched=False)
        world = int(env["WORLD_SIZE"])
        return cls(
            rank=int(env["RANK"]),
            world_size=world,
            local_rank=int(env.get("LOCAL_RANK", "0")),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", str(world))),
            restart_count=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
            launched=True,
        )


def usable_cpu_cores() -> int:
    """Cores this process may run on (its CPU affinity on Linux, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def uses_cuda(device_choice: str) -> bool:
    """Whether `train.device` means CUDA here (auto: when torch sees a GPU)."""
    return device_choice == "cuda" or (device_choice == "auto" and torch.cuda.is_available())


def max_cpu_ranks() -> int:
    """CPU ranks this node accepts: its usable cores, or MIN_CPU_RANKS on a machine with fewer."""
    return max(usable_cpu_cores(), MIN_CPU_RANKS)


def check_ranks_fit(device_choice: str, local_ranks: int) -> None:
    """NPROC ranks on this node need NPROC GPUs, or NPROC CPU cores (up to MIN_CPU_RANKS may share fewer)."""
    if uses_cuda(device_choice):
        count = torch.cuda.device_count()
        if count == 0:
            raise UserError("train.device=cuda but torch sees no CUDA GPU; accepted: device=cpu or auto")
        if local_ranks > count:
            raise UserError(
                f"NPROC={local_ranks} ranks per node but this node has {count} CUDA GPU(s); accepted: NPROC <= {count}"
            )
        return
    cores, most = usable_cpu_cores(), max_cpu_ranks()
    if local_ranks > most:
        raise UserError(
            f"NPROC={local_ranks} ranks per node but this machine has {cores} usable CPU core(s) "
            f"(one per rank, or up to {MIN_CPU_RANKS} sharing fewer cores); accepted: NPROC <= {most}"
        )


def default_local_ranks(device_choice: str) -> int:
    """Ranks per node when NPROC is not given: one per GPU, else two CPU ranks (one on a single core)."""
    if uses_cuda(device_choice):
        return max(1, torch.cuda.device_count())
    return min(2, usable_cpu_cores())


def pick_device(cfg: TrainConfig, env: DistEnv) -> tuple[DeviceInfo, str]:
    """This rank's device (cuda:LOCAL_RANK or the CPU) and collective backend (nccl or gloo)."""
    check_ranks_fit(cfg.device, env.local_world_size)
    use_cuda = uses_cuda(cfg.device)
    if use_cuda:
        torch.cuda.set_device(env.local_rank)
        dev = torch.device("cuda", env.local_rank)
        info = DeviceInfo(dev, "cuda", torch.cuda.get_device_name(dev))
    else:
        info = DeviceInfo(torch.device("cpu"), "cpu", cpu_model_name())
    backend = cfg.backend if cfg.backend != "auto" else ("nccl" if use_cuda else "gloo")
    if backend == "nccl" and not use_cuda:
        raise UserError("train.backend=nccl needs CUDA; accepted on CPU: backend=gloo or auto")
    return info, backend


def threads_per_rank(cfg: TrainConfig, env: DistEnv) -> int:
    """`train.threads`, else the usable cores shared evenly by this node's ranks."""
    if cfg.threads is not None:
        return cfg.threads
    return max(1, usable_cpu_cores() // env.local_world_size)


def init_process_group(env: DistEnv, backend: str, device: DeviceInfo, timeout_s: float) -> None:
    """Join the job's process group (an in-memory one for a world of one not started by torchrun)."""
    # The three stores' `type: ignore[attr-defined]`: torch.distributed re-exports them from torch._C
    # without listing them as exports, a gap in torch's typing.
    timeout = timedelta(seconds=timeout_s)
    device_id = device.torch_device if device.backend == "cuda" else None
    if not env.launched:
        store = dist.HashStore()  # type: ignore[attr-defined]
        dist.init_process_group(backend, store=store, rank=0, world_size=1, timeout=timeout, device_id=device_id)
        return
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # torchrun's agent shares one TCPStore across restarts, and its process-group keys (gloo's
        # peer addresses, NCCL's unique id) outlive a failed attempt: a restarted rank could read a
        # dead peer's address and hang connecting to it. Each attempt gets its own key prefix.
        agent_store = dist.TCPStore(  # type: ignore[attr-defined]
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout
        )
        attempt_store = dist.PrefixStore(  # type: ignore[attr-defined]
            f"fleetbench/attempt_{env.restart_count}", agent_store
        )
        dist.init_process_group(
            backend,
            store=attempt_store,
            rank=env.rank,
            world_size=env.world_size,
            timeout=timeout,
            device_id=device_id,
        )
        return
    dist.init_process_group(backend, timeout=timeout, device_id=device_id)


def broadcast_object(value: Any, src: int = 0) -> Any:
    """Rank `src`'s `value` on every rank (a collective: every rank must call it)."""
    box = [value]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def agree(what: str, value: Any) -> None:
    """Every rank must hold the same `value` (config, corpus); name the first rank that differs."""
    digest = hashlib.sha256(jsonio.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]
    digests: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(digests, digest)
    for rank, other in enumerate(digests):
        if other != digests[0]:
            raise UserError(
                f"rank {rank} has a different {what} than rank 0; start every node with the same "
                "config, flags and fleetbench/Python versions"
            )


def build_mesh(cfg: TrainConfig, env: DistEnv, device: DeviceInfo) -> DeviceMesh:
    """A 1-D shard mesh over every rank, or for HSDP a (replicate, shard) mesh of shard groups."""
    if not cfg.hsdp:
        return init_device_mesh(device.backend, (env.world_size,), mesh_dim_names=("shard",))
    shard = cfg.hsdp_shard_size or env.local_world_size
    if env.world_size % shard:
        raise UserError(
            f"HSDP shard groups of {shard} ranks do not divide the {env.world_size} ranks; "
            "accepted: train.hsdp_shard_size dividing NPROC x NNODES"
        )
    return init_device_mesh(device.backend, (env.world_size // shard, shard), mesh_dim_names=("replicate", "shard"))


def compute_dtype(plan: TrainPlan) -> torch.dtype:
    """The dtype the layers compute in: FSDP2's param_dtype of the plan's precision, bf16 or fp32."""
    dtype: torch.dtype = getattr(torch, plan.precision.param_dtype)
    return dtype


class DtypeProbe:
    """What FSDP2 really hands the layers, seen from inside the forward, not read from the config.

    A forward pre-hook on each watched linear runs after FSDP2's own pre-forward (the all-gather)
    and records, once, the weight's dtype, whether it is the all-gathered tensor (not a DTensor
    shard) and its shape, and the input's dtype; then it removes itself.
    """

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    def watch(self, name: str, module: torch.nn.Module) -> None:
        """Record what `module`'s first forward receives under `name`."""
        from torch.distributed.tensor import DTensor

        def hook(mod: torch.nn.Module, args: tuple[Any, ...]) -> None:
            weight = mod.weight
            assert isinstance(weight, torch.Tensor)
            self.seen[name] = {
                "weight_dtype": str(weight.dtype).removeprefix("torch."),
                "weight_unsharded": not isinstance(weight, DTensor),
                "weight_shape": list(weight.shape),
                "input_dtype": str(args[0].dtype).removeprefix("torch."),
            }
            handle.remove()

        handle = module.register_forward_pre_hook(hook)


def watch_dtypes(model: TrainModel, compiled: bool) -> DtypeProbe:
    """Watch the output head (root FSDP group) and, unless blocks are compiled, block 0's first MLP linear."""
    probe = DtypeProbe()
    probe.watch("output", model.output)
    if not compiled:  # a hook inside a compiled block would be traced into its graph
        block = model.blocks()[0]
        if isinstance(block, Block):
            probe.watch("layers.0.ffn.0", block.ffn[0])
        else:
            probe.watch("layers.0.feed_forward.w1", block.feed_forward.w1)
    return probe


def build_model(cfg: TrainConfig, plan: TrainPlan, mesh: DeviceMesh | None, device: DeviceInfo) -> TrainModel:
    """Decoder on `device`, every block its own fully_shard group, then the root; weights initialised.

    With meta_init the model is created on the meta device, sharded, then `to_empty` allocates only
    each rank's shards, so no rank ever holds the unsharded model.
    """
    dtype = compute_dtype(plan)
    build_on = torch.device("meta") if cfg.meta_init else torch.device("cpu")
    with build_on:
        model = build_decoder(plan.shape)
    if cfg.float8 != "off":  # before sharding and compiling, as torchtitan converts (train/float8.py)
        apply_float8(model, cfg.float8)
    for block in model.blocks():
        block.activation_checkpointing = cfg.activation_checkpointing
        block.ac_policy = cfg.ac_policy
        if cfg.compile:
            block.compile()
    if not cfg.meta_init:
        init_weights(model, cfg.seed)  # full weights on the CPU first (small models, or a check of meta init)
    if cfg.fsdp:
        assert mesh is not None
        policy = MixedPrecisionPolicy(
            param_dtype=dtype if dtype != torch.float32 else None,
            reduce_dtype=getattr(torch, plan.precision.reduce_dtype),
        )
        for block in model.blocks():
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=cfg.reshard_after_forward)
        fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=cfg.reshard_after_forward)
    if cfg.meta_init:
        model.to_empty(device=device.torch_device)
        init_weights(model, cfg.seed)
    else:
        model.to(device.torch_device)
    return model


def build_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with its fused kernel (torchtitan's default implementation), on CPU and CUDA alike.

    Under FSDP2 the parameters are DTensors, and each op of the default foreach chain pays DTensor
    dispatch: on the CPU `tiny` preset the optimiser step took 9-14 ms per rank with foreach and
    2-3 ms fused (one unsharded process: 5-7 ms and 2-3 ms). The update is the same AdamW.
    """
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, fused=True)
