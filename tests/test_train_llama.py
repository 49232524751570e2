"""The llama-family model (train.model=llama) against torchtitan's own Llama 3, on the same weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fleetbench.config.train import PRESETS, TrainConfig
from fleetbench.errors import UserError
from fleetbench.train.decoder import build_decoder, init_weights, param_counts
from fleetbench.train.plan import ModelShape, resolve_plan

llama3 = pytest.importorskip("torchtitan.models.llama3", reason="torchtitan (dev extra) is the reference")


def _torchtitan_model(n_kv_heads: int | None) -> torch.nn.Module:
    """torchtitan's llama3 debug model (flex attention, as it trains), optionally with GQA."""
    config = llama3.llama3_configs["debugmodel"](attn_backend="flex")
    if n_kv_heads is not None:
        block = config.layers[0]
        layers = llama3._build_llama3_layers(
            n_layers=len(config.layers),
            dim=config.dim,
            n_heads=block.attention.n_heads,
            n_kv_heads=n_kv_heads,
            hidden_dim=block.feed_forward.w1.out_features,
            rope=block.attention.rope,
            attn_backend="flex",
        )
        config = dataclasses.replace(config, layers=layers)
    torch.manual_seed(0)
    model: torch.nn.Module = config.build()
    return model.eval()


def _ours_to_torchtitan(name: str) -> str:
    name = name.replace("attention.wq.", "attention.qkv_linear.wq.")
    name = name.replace("attention.wk.", "attention.qkv_linear.wk.")
    name = name.replace("attention.wv.", "attention.qkv_linear.wv.")
    return "lm_head.weight" if name == "output.weight" else name


def _shape(kv_heads: int | None = None) -> ModelShape:
    plan = resolve_plan(TrainConfig(model="llama", kv_heads=kv_heads), world_size=1)
    return plan.shape


@pytest.fixture
def flex_without_inductor(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchtitan compiles flex attention with inductor: two minutes of C++ builds on a 2-core CPU. The same
    flex_attention op traced by dynamo's eager backend computes the same attention, unfused, in seconds."""
    from torch.nn.attention.flex_attention import flex_attention
    from torchtitan.models.common import attention

    monkeypatch.setattr(attention.FlexAttention, "_compiled_flex_attn", torch.compile(flex_attention, backend="eager"))
    monkeypatch.setattr(attention, "_compiled_create_block_mask", attention.create_block_mask)


@pytest.mark.usefixtures("flex_without_inductor")
@pytest.mark.parametrize("kv_heads", [None, 4], ids=["mha", "gqa"])
def test_llama_logits_equal_torchtitan(kv_heads: int | None) -> None:
    shape = _shape(kv_heads)
    ours = build_decoder(shape).eval()
    init_weights(ours, seed=3)
    theirs = _torchtitan_model(kv_heads)
    state = {_ours_to_torchtitan(k): v for k, v in ours.state_dict().items()}
    missing, unexpected = theirs.load_state_dict(state, strict=False)
    assert not unexpected
    assert all(k.endswith("rope.cache") for k in missing), missing  # buffers, not weights
    tokens = torch.randint(0, shape.vocab_size, (2, 96), generator=torch.Generator().manual_seed(1))
    positions = torch.arange(tokens.shape[1]).expand(tokens.shape[0], -1)
    with torch.no_grad():
        expected = theirs(tokens, positions, theirs.get_attention_masks(positions))
        got = ours(tokens)
    # fp32 on both sides; the order of sums differs (flex attention vs SDPA, complex vs real RoPE)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    assert (got - expected).abs().max() < 1e-4


def test_llama_preset_is_torchtitans_debug_model() -> None:
    config = llama3.llama3_configs["debugmodel"](attn_backend="flex")
    block = config.layers[0]
    shape = _shape()
    assert (shape.dim, shape.layers, shape.vocab_size) == (config.dim, len(config.layers), config.vocab_size)
    assert (shape.heads, shape.n_kv_heads) == (block.attention.n_heads, block.attention.n_kv_heads or shape.heads)
    assert shape.ffn_dim == block.feed_forward.w1.out_features
    assert shape.rope_theta == block.attention.rope.theta and block.attention.rope.scaling == "llama"
    assert shape.norm_eps == block.attention_norm.eps
    model = build_decoder(shape)
    assert param_counts(shape)[0] == sum(p.numel() for p in model.parameters())


def test_llama_8b_preset_counts_8b_parameters() -> None:
    preset = PRESETS["llama3-8b"]
    shape = ModelShape(
        preset.dim, preset.layers, preset.heads, preset.ffn_dim, preset.vocab_size, model="llama", kv_heads=8
    )
    total, _ = param_counts(shape)
    assert 8.0e9 < total < 8.1e9  # Llama-3-8B: 8.03B


def test_llama_default_presets_by_device() -> None:
    from fleetbench.train.defaults import choose_preset

    assert choose_preset(None, "cpu", "llama").name == "llama3-debug"
    assert choose_preset(None, "cuda", "llama").name == "llama3-8b"
    assert choose_preset(None, "cpu").name == "tiny"


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"model": "llama", "kv_heads": 5}, "train.kv_heads=5 does not divide train.heads=16"),
        ({"kv_heads": 2}, "train.kv_heads=2 is a llama setting but train.model=seed"),
        ({"model": "llama", "dim": 240, "heads": 16}, "odd head width 15"),
    ],
)
def test_llama_bad_shapes_are_one_line(settings: dict[str, object], says: str) -> None:
    with pytest.raises(UserError, match=says):
        resolve_plan(TrainConfig.model_validate(settings), world_size=1)
