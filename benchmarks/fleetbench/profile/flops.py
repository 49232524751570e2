"""FLOPs and tensor bytes of one torch op call, from the inputs torch.profiler recorded.

FLOPs come from the first of these sources that has a count (the source is kept with the op):
  torch.profiler  the profiler's own count (with_flops): matmul, addmm, bmm, convolution, mul, add
  flop_counter    the formula torch.utils.flop_counter registers for the op (the matmul family,
                  convolution, attention) applied to the recorded shapes; the CPU flash-attention
                  ops take the formulas of their CUDA twins (same shapes, same math). As in
                  flop_counter, causal attention counts the full score matrix.
  op table        OP_TABLE below, for the elementwise ops, reductions, softmax, layer norm and the
                  optimizer steps that neither of the above counts
  none            no count: the op moves data (copy_, fill_, cat, index ops, triu, embedding) or is
                  not in the table; it is classed by its bytes alone
Convention of the op table: one arithmetic operation or elementary function (exp, log, sqrt, rsqrt,
tanh, erf, pow) on one element is one FLOP, as torch.profiler counts mul and add; comparisons (max,
relu) and data movement are none. Composite functions count their steps, e.g. silu x / (1 + e^-x):
neg, exp, add, div = 4.

Bytes (the minimum traffic): every tensor input read once, every output written once (the profiler
gives an op's new allocations; an out= tensor is among the inputs), and an input the op updates in
place (add_, the optimizer's parameters and moments) written back once more. Views (VIEW_OPS) move
no data of their own: no bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from math import prod
from typing import Any, Final

log = logging.getLogger(__name__)

FLOP_SOURCES: Final = ("torch.profiler", "flop_counter", "op table", "none")

# The dtype strings torch.profiler records for op inputs, as torch dtype names.
PROFILER_DTYPES: Final[dict[str, str]] = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "long int": "int64",
    "int": "int32",
    "short int": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "c10::Float8_e4m3fn": "float8_e4m3fn",
    "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
}
FLOAT_DTYPES: Final = frozenset({"float32", "float64", "float16", "bfloat16"})
# Ops that only make a new view of their input: no tensor traffic of their own.
VIEW_OPS: Final = frozenset(
    f"aten::{name}"
    for name in (
        "t",
        "transpose",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "expand",
        "expand_as",
        "permute",
        "slice",
        "select",
        "unsqueeze",
        "squeeze",
        "detach",
        "alias",
        "resolve_conj",
        "resolve_neg",
        "split",
        "split_with_sizes",
        "chunk",
        "narrow",
        "unflatten",
        "flatten",
        "view_as",
        "unbind",
        "numpy_T",
        "lift_fresh",
        "empty",
        "empty_like",
        "empty_strided",
    )
)


@dataclass(frozen=True)
class Tensor:
    """One tensor argument of a call: its shape, dtype name and element size."""

    shape: tuple[int, ...]
    dtype: str
    itemsize: int

    @property
    def numel(self) -> int:
        """Elements in the tensor."""
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the tensor holds."""
        return self.numel * self.itemsize


# One argument of a call: a tensor, a tensor list (the foreach and fused optimizer ops), or
# anything else (a scalar, None, an argument whose shape was not recorded).
Arg = Tensor | tuple[Tensor, ...] | None


def _tensor(shape: Any, dtype_name: str) -> Tensor | None:
    import torch  # here, not with the module: the roofline and display modules import this one without torch

    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype) or not isinstance(shape, list | tuple):
        return None
    if not all(isinstance(d, int) for d in shape):
        return None
    return Tensor(tuple(shape), dtype_name, dtype.itemsize)


def args_from_event(shapes: Sequence[Any], dtypes: Sequence[Any]) -> list[Arg]:
    """A FunctionEvent's inputs (input_shapes, input_dtypes) as call arguments."""
    args: list[Arg] = []
    for shape, dtype in zip(shapes, dtypes, strict=False):
        name = PROFILER_DTYPES.get(str(dtype))
        args.append(_tensor(shape, name) if name is not None else None)
    return args


def args_from_tree(inputs: Sequence[Any]) -> list[Arg]:
    """An op's inputs from the profiler's event tree, where tensor lists keep their shapes."""
    import torch

    def one(value: Any) -> Tensor | None:
        dtype = getattr(value, "dtype", None)
        sizes = getattr(value, "sizes", None)
        if not isinstance(dtype, torch.dtype) or sizes is None:
            return None
        return _tensor(list(sizes), str(dtype).removeprefix("torch."))

    args: list[Arg] = []
    for value in inputs:
        if isinstance(value, list):
            args.append(tuple(t for t in map(one, value) if t is not None))
        else:
            args.append(one(value))
    return args


def tensors(args: Sequence[Arg]) -> list[Tensor]:
    """Every tensor among the arguments, tensor lists flattened."""
    flat: list[Tensor] = []
    for arg in args:
        if isinstance(arg, Tensor):
            flat.append(arg)
        elif isinstance(arg, tuple):
            flat.extend(arg)
    return flat


def main_dtype(args: Sequence[Arg]) -> str | None:
    """The first floating-point dtype among the arguments: the roof the op is placed under."""
    return next((t.dtype for t in tensors(args) if t.dtype in FLOAT_DTYPES), None)


@dataclass(frozen=True)
class Rule:
    """FLOPs per element of one op, which elements, and which inputs it writes back in place.

    over: `output` the broadcast shape of the tensor inputs (elementwise ops), `input` the first
    tensor input (reductions, row-wise ops), `list` the elements of the first tensor list.
    """

    flops_per_element: float
    over: str = "output"
    writes: tuple[int, ...] = ()


# FLOPs per output element of elementwise ops; the in-place variant (name_) counts the same and
# writes its first input back.
ELEMENTWISE: Final[dict[str, float]] = {
    "add": 1,
    "sub": 1,
    "rsub": 1,
    "mul": 1,
    "div": 1,
    "neg": 1,
    "reciprocal": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "exp": 1,
    "log": 1,
    "tanh": 1,
    "erf": 1,
    "pow": 1,  # x ** 2 is one multiply; a general power one elementary function
    "sigmoid": 4,  # 1 / (1 + e^-x): neg, exp, add, div
    "silu": 4,  # x / (1 + e^-x): neg, exp, add, div
    "silu_backward": 9,  # s = sigmoid(x) 4, then dy * s * (1 + x * (1 - s)): sub, mul, add, mul, mul
    "sigmoid_backward": 3,  # dy * y * (1 - y)
    "tanh_backward": 3,  # dy * (1 - y * y)
    "gelu": 5,  # erf form 0.5 x (1 + erf(x / sqrt 2)): div, erf, add, mul, mul
    "addcmul": 3,  # self + value * t1 * t2
    "addcdiv": 3,  # self + value * t1 / t2
    "lerp": 3,  # self + weight * (end - self)
}
# FLOPs per element of the first input of reductions and row-wise ops.
PER_INPUT_ELEMENT: Final[dict[str, float]] = {
    "sum": 1,  # one add per element
    "mean": 1,  # sum, then one divide per output (negligible)
    "linalg_vector_norm": 2,  # square and add per element
    "embedding_dense_backward": 1,  # each gradient row added into the weight's gradient
    "_softmax": 4,  # per row max (comparisons), then sub, exp, sum, div per element
    "_log_softmax": 4,  # sub max, exp, sum, sub log-sum
    "_softmax_backward_data": 4,  # dy * y, row sum, sub, mul
    "_log_softmax_backward_data": 4,  # exp, row sum of dy, mul, sub
    "native_layer_norm": 7,  # mean 1, sub 1, square 1, sum 1, * rstd 1, * weight 1, + bias 1
}
OP_TABLE: Final[dict[str, Rule]] = {
    **{f"aten::{name}": Rule(flops) for name, flops in ELEMENTWISE.items()},
    **{f"aten::{name}_": Rule(flops, writes=(0,)) for name, flops in ELEMENTWISE.items()},
    **{f"aten::{name}": Rule(flops, over="input") for name, flops in PER_INPUT_ELEMENT.items()},
    # AdamW per parameter element: weight decay 1 (p *= 1 - lr*wd), first moment 3 (lerp), second
    # moment 4 (v * b2 + (1 - b2) * g * g), denominator 3 (sqrt, / bias correction, + eps), update 3
    # (m / denom, * step size, p -); it reads params, grads, both moments and writes back three.
    "aten::_fused_adamw_": Rule(14, over="list", writes=(0, 2, 3)),
    "aten::_foreach_add_": Rule(1, over="list", writes=(0,)),
    "aten::_foreach_mul_": Rule(1, over="list", writes=(0,)),
}


def _elements(rule: Rule, args: Sequence[Arg]) -> int:
    if rule.over == "list":
        first = next((arg for arg in args if isinstance(arg, tuple)), ())
        return sum(t.numel for t in first)
    shapes = [t.shape for t in args if isinstance(t, Tensor)]
    if not shapes:
        return 0
    if rule.over == "input":
        return prod(shapes[0])
    return prod(_broadcast(shapes))


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The broadcast shape of elementwise inputs; an out= tensor of another shape gives the largest input."""
    rank = max(len(shape) for shape in shapes)
    out = [1] * rank
    for shape in shapes:
        for index, size in enumerate(shape, start=rank - len(shape)):
            if size != 1 and out[index] not in (1, size):
                return max(shapes, key=prod)
            out[index] = size if size != 1 else out[index]
    return tuple(out)


# The CPU flash-attention ops take the same leading tensors as their CUDA twins, whose formulas
# torch.utils.flop_counter registers.
FLOP_COUNTER_ALIASES: Final[dict[str, str]] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "aten::_scaled_dot_product_flash_attention_backward",
}


@cache
def flop_counter_formulas() -> dict[str, Callable[..., int]]:
    """torch.utils.flop_counter's formulas by profiler op name (aten::mm ...), with the aliases."""
    from torch._ops import OpOverloadPacket
    from torch.utils.flop_counter import flop_registry

    formulas = {
        key._qualified_op_name: formula for key, formula in flop_registry.items() if isinstance(key, OpOverloadPacket)
    }
    for alias, target in FLOP_COUNTER_ALIASES.items():
        if target in formulas:
            formulas[alias] = formulas[target]
    return formulas


def flop_counter_flops(name: str, args: Sequence[Arg]) -> int:
    """FLOPs of one call by torch.utils.flop_counter's formula, 0 when it has none for these inputs."""
    formula = flop_counter_formulas().get(name)
    if formula is None:
        return 0
    leading: list[list[int]] = []
    for arg in args:  # the formulas take the shapes of the leading tensor arguments
        if not isinstance(arg, Tensor):
            break
        leading.append(list(arg.shape))
    try:
        return int(formula(*leading, out_val=None))
    except (TypeError, ValueError, AssertionError, IndexError) as exc:
        # Formulas that need non-tensor arguments (convolution's stride, transposed) or output
        # shapes the profiler does not record: torch.profiler counts convolution itself.
        log.debug("flop_counter cannot count %s on %s: %s", name, leading, exc)
        return 0


@dataclass(frozen=True)
class CallCount:
    """FLOPs and bytes of one op call, and where its FLOP count comes from (one of FLOP_SOURCES)."""

    flops: float
    bytes: float
    source: str


def count_call(name: str, args: Sequence[Arg], profiler_flops: float, allocated: int) -> CallCount:
    """FLOPs (first source with a count, see the module docstring) and bytes of one call.

    `allocated`: the bytes the profiler saw the op allocate (its new outputs).
    """
    rule = OP_TABLE.get(name)
    written = sum(tensor_bytes(args[i]) for i in rule.writes if i < len(args)) if rule else 0
    traffic = float(sum(t.nbytes for t in tensors(args)) + max(allocated, 0) + written)
    if profiler_flops > 0:
        return CallCount(profiler_flops, traffic, "torch.profiler")
    if counted := flop_counter_flops(name, args):
        return CallCount(float(counted), traffic, "flop_counter")
    if rule is not None and (elements := _elements(rule, args)):
        return CallCount(rule.flops_per_element * elements, traffic, "op table")
    return CallCount(0.0, traffic, "none")


def tensor_bytes(arg: Arg) -> int:
    """Bytes of a tensor or a tensor list argument (0 for anything else)."""
    return sum(t.nbytes for t in tensors([arg]))
