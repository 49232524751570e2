"""FLOPs and bytes per op call: torch.profiler's count, torch.utils.flop_counter, the op table, none."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from fleetbench.profile.capture import input_dtypes, kineto_input_dtypes, op_stats, tensor_list_calls
from fleetbench.profile.flops import (
    FLOP_SOURCES,
    OP_TABLE,
    Tensor,
    args_from_event,
    count_call,
)

F32 = 4


def f32(*shape: int) -> Tensor:
    return Tensor(tuple(shape), "float32", F32)


@pytest.mark.parametrize(
    ("name", "args", "flops"),
    [
        # silu x / (1 + e^-x): neg, exp, add, div per element of [8, 128, 512]
        ("aten::silu", [f32(8, 128, 512)], 4 * 8 * 128 * 512),
        # sigmoid 4, then dy * s * (1 + x * (1 - s)) 5, per element
        ("aten::silu_backward", [f32(8, 128, 512), f32(8, 128, 512)], 9 * 8 * 128 * 512),
        ("aten::pow", [f32(8, 128, 128), None], 8 * 128 * 128),  # x ** 2: one multiply per element
        ("aten::mul", [f32(8, 128, 128), f32(8, 128, 1)], 8 * 128 * 128),  # broadcast: the output's elements
        ("aten::rsqrt", [f32(8, 128, 1)], 8 * 128),
        # mean's sum with its out= tensor: one add per input element
        ("aten::sum", [f32(8, 128, 128), None, None, None, f32(8, 128, 1)], 8 * 128 * 128),
        ("aten::_softmax", [f32(4, 128, 128), None, None], 4 * 4 * 128 * 128),  # sub, exp, sum, div
        ("aten::add_", [f32(128, 8, 384), f32(384), None], 128 * 8 * 384),
    ],
)
def test_op_table_flops_are_the_hand_count(name: str, args: list[Tensor | None], flops: int) -> None:
    call = count_call(name, args, profiler_flops=0, allocated=0)
    assert call.source == "op table"
    assert call.flops == flops


def test_fused_adamw_counts_fourteen_flops_and_seven_tensors_per_parameter() -> None:
    params = (f32(32, 64), f32(32))
    scalars = (f32(), f32())  # state steps
    args = [params, params, params, params, (), scalars, None, None]
    call = count_call("aten::_fused_adamw_", args, profiler_flops=0, allocated=0)
    numel = 32 * 64 + 32
    assert call.source == "op table" and call.flops == 14 * numel
    # reads params, grads, exp_avgs, exp_avg_sqs and the steps; writes params and both moments back
    assert call.bytes == (4 + 3) * numel * F32 + 2 * F32


def test_in_place_ops_write_their_first_input_back() -> None:
    call = count_call("aten::add_", [f32(128, 8, 384), f32(384), None], profiler_flops=0, allocated=0)
    assert call.bytes == (2 * 128 * 8 * 384 + 384) * F32  # self read and written, bias read
    out_of_place = count_call("aten::add", [f32(128, 8, 384), f32(384), None], profiler_flops=0, allocated=1024)
    assert out_of_place.bytes == (128 * 8 * 384 + 384) * F32 + 1024  # inputs read, new output written


def test_flop_counter_counts_matmul_and_cpu_attention() -> None:
    mm = count_call("aten::mm", [f32(64, 128), f32(128, 32)], profiler_flops=0, allocated=0)
    assert mm.source == "flop_counter" and mm.flops == 2 * 64 * 128 * 32
    q = f32(8, 4, 128, 32)  # batch 8, 4 heads, 128 tokens, head dim 32
    forward = count_call("aten::_scaled_dot_product_flash_attention_for_cpu", [q, q, q, None, None, None, None], 0, 0)
    assert forward.source == "flop_counter"
    assert forward.flops == 2 * (2 * 8 * 4 * 128 * 128 * 32)  # Q K^T and P V
    backward = count_call(
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
        [q, q, q, q, q, f32(8, 4, 128), None, None, None, None],
        0,
        0,
    )
    assert backward.source == "flop_counter" and backward.flops == 5 * (2 * 8 * 4 * 128 * 128 * 32)


def test_the_profiler_count_comes_first_and_data_movement_has_none() -> None:
    mm = count_call("aten::mm", [f32(64, 128), f32(128, 32)], profiler_flops=123.0, allocated=0)
    assert mm.source == "torch.profiler" and mm.flops == 123.0
    copy = count_call("aten::copy_", [f32(16, 16), f32(16, 16), None], profiler_flops=0, allocated=0)
    assert copy.source == "none" and copy.flops == 0 and copy.bytes == 2 * 256 * F32
    assert count_call("aten::frobnicate", [f32(4)], 0, 0).source == "none"


def test_profiler_dtype_strings_become_tensors() -> None:
    args = args_from_event([[8, 128], [], [3]], ["float", "Scalar", "c10::BFloat16"])
    assert args == [f32(8, 128), None, Tensor((3,), "bfloat16", 2)]
    assert set(FLOP_SOURCES) == {"torch.profiler", "flop_counter", "op table", "none"}
    assert all(rule.over in ("output", "input", "list") for rule in OP_TABLE.values())


def test_real_profiler_events_get_their_counts() -> None:
    """A small SiLU MLP step with fused AdamW: shapes as torch.profiler records them, tensor lists from its event tree."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.Linear(64, 32))
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(16, 32)

    def step() -> None:
        model(x).pow(2).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        step()
    ops = {op.name: op for op in op_stats(prof.events(), on_gpu=False, tensor_lists=tensor_list_calls(prof))}
    assert ops["aten::silu"].flops == 4 * 16 * 64 and ops["aten::silu"].flop_source == "op table"
    assert ops["aten::silu_backward"].flops == 9 * 16 * 64
    assert ops["aten::addmm"].flop_source == "torch.profiler"
    params = sum(p.numel() for p in model.parameters())
    adamw = ops["aten::_fused_adamw_"]
    assert adamw.flops == 14 * params and adamw.flop_source == "op table" and adamw.dtype == "float32"
    assert adamw.bytes >= 7 * params * F32


class _EventBeforeTorch212:
    """A FunctionEvent as torch before 2.12 made it: the same fields, no `input_dtypes`."""

    def __init__(self, event: object) -> None:
        self._event = event

    def __getattr__(self, name: str) -> object:
        if name == "input_dtypes":
            raise AttributeError(name)
        return getattr(self._event, name)


def test_input_dtypes_come_from_the_kineto_events_where_the_function_events_lack_them() -> None:
    """torch 2.11 (CUDA 13 builds) has no FunctionEvent.input_dtypes: without them every op lost its dtype and counts."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.Linear(64, 32)).to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(16, 32, dtype=torch.bfloat16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        model(x).float().pow(2).sum().backward()
        optimizer.step()
    events = prof.events()
    by_id = kineto_input_dtypes(prof)
    ops_with_inputs = [e for e in events if e.input_shapes]
    assert ops_with_inputs and all(input_dtypes(e, by_id) == list(map(str, e.input_dtypes)) for e in ops_with_inputs)
    assert all(input_dtypes(e, {}) == list(map(str, e.input_dtypes)) for e in ops_with_inputs)

    lists = tensor_list_calls(prof)
    now = op_stats(events, on_gpu=False, tensor_lists=lists)
    old_events = [_EventBeforeTorch212(e) for e in events]
    assert all(input_dtypes(e, {}) == [] for e in old_events), "the stand-in has no input_dtypes"
    lost = {op.name: op for op in op_stats(old_events, on_gpu=False, tensor_lists=lists)}
    assert lost["aten::addmm"].dtype is None, "without the kineto dtypes the dtype is lost (the bug this guards)"
    before = op_stats(old_events, on_gpu=False, tensor_lists=lists, dtypes_by_id=by_id)
    assert [(op.name, op.dtype, op.flops, op.bytes) for op in before] == [
        (op.name, op.dtype, op.flops, op.bytes) for op in now
    ]
    assert {op.name: op.dtype for op in before}["aten::addmm"] == "bfloat16"
