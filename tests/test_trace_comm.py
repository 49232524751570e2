"""Communication by what a kernel does: the rule table of `trace.comm` on traces built in torch.profiler's format.

The kernel names are the ones these libraries launch (DeepEP's dispatch/combine, PyTorch
SymmetricMemory's multimem all-reduce, vLLM's and TensorRT-LLM's custom all-reduce, NVSHMEM); HTA's
rule (`nccl` in the name) counts them all as computation, which `--comm hta` reproduces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetbench.config.schema import FleetbenchConfig
from fleetbench.profile.trace.comm import COMM_MODES, KERNEL_RULES, CommRules, is_host_collective
from fleetbench.profile.trace.summary import summarize_trace
from testdata import get_test_data_dir

DATA = get_test_data_dir()
NCCL = DATA / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
US = 1e-6

# (rule expected, kernel name as the profiler records it)
COMM_KERNELS = [
    ("nccl", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    ("nccl", "rcclGenericKernel<1, false>"),
    ("deepep", "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)"),
    ("deepep", "void deep_ep::internode_ll::combine<false>(void*, void*, int*, void*)"),
    ("deepep", "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)"),
    ("all_to_all", "void pplx::a2a_dispatch_kernel<float>(int, int)"),
    ("all_to_all", "void moe::all_to_all_kernel<__nv_bfloat16>(void*)"),
    ("nvshmem", "void c10d::symmetric_memory::multimem_all_reduce_kernel<__nv_bfloat16, 16, 8>(...)"),
    ("nvshmem", "nvshmemi_transfer_rma_kernel"),
    ("custom_allreduce", "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, ...)"),
    ("custom_allreduce", "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(...)"),
    ("custom_allreduce", "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<...>"),
    ("custom_allreduce", "userbuffers_fp16_sum_inplace_gpu_rw"),
]
COMPUTE_KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, at::detail::Array<char*, 1> >",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, true>(Flash_fwd_params)",
    "triton_red_fused_add_all_reduce_sum_0",  # a reduction named by Inductor: not a collective
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>",
    "fused_moe_kernel",  # the experts' GEMM, not their dispatch
]


def kernel(name: str, ts: float, dur: float, stream: int = 7, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, **args},
    }


def write(tmp: Path, events: list[dict[str, Any]], name: str = "t.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(("rule", "name"), COMM_KERNELS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(COMM_KERNELS)])
def test_each_family_of_collective_kernels_is_communication(rule: str, name: str) -> None:
    assert CommRules().kernel_rule(name) == rule
    expected = "nccl (HTA)" if re.match("^nccl.*Kernel", name) else None
    assert CommRules("hta").kernel_rule(name) == expected


@pytest.mark.parametrize("name", COMPUTE_KERNELS)
def test_compute_kernels_are_not_taken_for_communication(name: str) -> None:
    assert CommRules().kernel_rule(name) is None


def test_deepep_and_multimem_trace_counts_communication_and_hta_mode_does_not(tmp_path: Path) -> None:
    """A step of an MoE layer: GEMM, DeepEP dispatch on a second stream partly under it, combine exposed,
    a multimem all-reduce exposed."""
    trace = write(
        tmp_path,
        [
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 0, 100),
            kernel("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*)", 50, 100, stream=20),
            kernel("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*)", 160, 40, stream=20),
            kernel("void c10d::symmetric_memory::multimem_all_reduce_kernel<__nv_bfloat16, 16, 8>", 210, 20),
        ],
    )
    ours = summarize_trace(trace)
    (device,) = ours.devices
    assert device.compute_s == pytest.approx(100 * US)
    assert device.communication_total_s == pytest.approx(160 * US)
    assert device.comm_compute_overlap_s == pytest.approx(50 * US)
    assert device.communication_s == pytest.approx(110 * US)  # 100..150, 160..200, 210..230
    assert device.idle_s == pytest.approx(20 * US)
    assert {u.rule: u.kernels for u in ours.comm_rules} == {"deepep": 2, "nvshmem": 1}
    assert any("which HTA (only names matching ^nccl.*Kernel) counts as computation" in d for d in ours.hta_differences)
    assert ours.communication.startswith("communication: kernels by what they do")

    hta = summarize_trace(trace, rules=CommRules("hta"))
    (same,) = hta.devices
    assert same.communication_total_s == 0 and same.comm_overlap_ratio is None
    assert same.compute_s == pytest.approx(210 * US)  # every kernel is computation under HTA's rule
    assert hta.communication == "communication: HTA's rule (a kernel name matching ^nccl.*Kernel)"
    assert not any("counted as communication" in d for d in hta.hta_differences)


def test_collective_args_mark_a_kernel_of_any_name(tmp_path: Path) -> None:
    """record_param_comms' `Collective name` on a kernel of a library the table does not know."""
    trace = write(
        tmp_path,
        [
            kernel("gemm", 0, 100),
            kernel("mylib_ring_step", 100, 50, **{"Collective name": "all_reduce", "In msg nelems": 1024}),
        ],
    )
    (device,) = summarize_trace(trace).devices
    assert device.communication_s == pytest.approx(50 * US)
    (hta,) = summarize_trace(trace, rules=CommRules("hta")).devices
    assert hta.communication_s == 0


def test_patterns_from_the_config_add_and_replace_rules(tmp_path: Path) -> None:
    trace = write(tmp_path, [kernel("gemm", 0, 100), kernel("mylib_ring_step", 100, 50)])
    rules = CommRules("fleetbench", {"mylib": r"^mylib_"})
    summary = summarize_trace(trace, rules=rules)
    assert summary.devices[0].communication_s == pytest.approx(50 * US)
    assert [u.rule for u in summary.comm_rules] == ["mylib"]
    replaced = CommRules("fleetbench", {"nccl": r"^never$"})
    assert replaced.kernel_rule("ncclDevKernel_AllReduce") is None


def test_config_section_validates_modes_and_patterns() -> None:
    config = FleetbenchConfig.model_validate({"trace": {"comm": "hta", "comm_patterns": {"mine": "^x"}}})
    assert config.trace.comm == "hta" and config.trace.comm_patterns == {"mine": "^x"}
    assert set(COMM_MODES) == {"fleetbench", "hta"}
    with pytest.raises(ValueError, match="is not a regular expression"):
        FleetbenchConfig.model_validate({"trace": {"comm_patterns": {"bad": "("}}})
    with pytest.raises(ValueError, match="comm"):
        FleetbenchConfig.model_validate({"trace": {"comm": "nccl"}})
    assert set(KERNEL_RULES) == {"nccl", "deepep", "all_to_all", "nvshmem", "custom_allreduce"}


def test_host_collectives_by_name_and_by_args() -> None:
    for name in ("gloo:all_reduce", "nccl:all_gather", "mpi:allreduce", "c10d::allreduce_", "record_param_comms"):
        assert is_host_collective(name)
    assert not is_host_collective("aten::mm")
    assert is_host_collective("my_collective_wrapper", {"Collective name": "broadcast"})
    assert not is_host_collective("aten::mm", {"Input Dims": [[2]]})


@pytest.mark.realdata
def test_nccl_kernels_of_a_real_trace_are_named_by_the_nccl_rule_and_agree_with_hta_mode() -> None:
    """On HTA's NCCL trace the table and HTA's rule agree: every collective there is an NCCL kernel."""
    ours = summarize_trace(NCCL)
    hta = summarize_trace(NCCL, rules=CommRules("hta"))
    assert ours.devices == hta.devices
    assert [(u.rule, u.kernels) for u in ours.comm_rules] == [("nccl", 14)]
    assert not any("counted as communication" in d for d in ours.hta_differences)


def test_trace_summarize_comm_flag(
    fleetbench: Callable[..., int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = write(tmp_path, [kernel("gemm", 0, 100), kernel("void deep_ep::intranode::combine<8>", 100, 50)])
    assert fleetbench("trace", "summarize", trace, "--no-chart", "--json") == 0
    ours = json.loads(capsys.readouterr().out)["traces"][0]
    assert ours["devices"][0]["communication_s"] == pytest.approx(50 * US)
    assert fleetbench("trace", "summarize", trace, "--no-chart", "--json", "--comm", "hta") == 0
    hta = json.loads(capsys.readouterr().out)["traces"][0]
    assert hta["devices"][0]["communication_s"] == 0
    assert fleetbench("trace", "summarize", trace, "--no-chart", "--set", "trace.comm_patterns.x=(") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is not a regular expression" in line
