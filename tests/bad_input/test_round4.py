"""Bad input, round 4: what is stored must be usable later, runs and files that exist are kept, damaged
or mismatched checkpoints for `edge llm`, runs that would measure nothing, image references, Slurm
options, config files and --set, and results folders that are files or loops.

Each case runs the entry point in-process through tests/badinput.py:check: one `fleetbench: error:`
line, exit 2, no traceback, nothing written (a refused run leaves no folder; an existing run's
records.jsonl and a user's file keep their bytes and times).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from badinput import BadInput, check, record_line

FLOPS = "probe_achieved_flop_per_second"
CKPT_ACCEPTED = "accepted: a DCP step folder (step_NNNNNNNN) or a torch.save state dict of this preset's llama"


def failed_line(run_id: str) -> str:
    """A record of a run that failed: no figures."""
    body = json.loads(record_line(run_id))
    body.update(status="failed", error="boom")
    return json.dumps(body) + "\n"


def ok_line_with_figure(run_id: str) -> str:
    body = json.loads(record_line(run_id))
    body["headline"] = [
        {"metric": f"fleetbench_{FLOPS}", "labels": {"probe": "matmul"}, "value": 1e9, "samples": [1e9]}
    ]
    return json.dumps(body) + "\n"


def llm(*args: str) -> tuple[str, ...]:
    """`edge llm` on llama.cpp only (one runtime: the checkpoint is read before any runtime runs)."""
    return ("edge", "llm", "--results-dir", "{tmp}/results", "--runtimes", "llama.cpp", "--dtypes", "f32", *args)


# --- checkpoints, made when a case runs (torch loads then, not when the cases are counted) ---------------------
def _model_state(**overrides: int) -> dict[str, object]:
    """The state dict of the llama3-debug model (of another shape with `overrides`), as constructed: the
    values do not matter here, and the seeded init the edge job uses takes seconds."""
    from fleetbench.config.train import TrainConfig
    from fleetbench.train.llama import Llama
    from fleetbench.train.plan import resolve_plan

    cfg = TrainConfig.model_validate({"preset": "llama3-debug", "model": "llama", **overrides})
    return dict(Llama(resolve_plan(cfg, world_size=1).shape).state_dict())


def _saved(name: str, make: Callable[[], object]) -> Callable[[Path], None]:
    def prepare(tmp: Path) -> None:
        import torch

        torch.save(make(), tmp / name)

    prepare.__name__ = f"saved({name}, {make.__name__})"
    return prepare


def _edited(name: str, edit: Callable[[bytes], bytes], label: str) -> Callable[[Path], None]:
    """A valid checkpoint of the right model, then `edit`ed on disk (cut, bits flipped)."""

    def prepare(tmp: Path) -> None:
        import torch

        path = tmp / name
        torch.save(_model_state(), path)
        path.write_bytes(edit(path.read_bytes()))

    prepare.__name__ = f"edited({name}, {label})"
    return prepare


def _poisoned(value: float) -> Callable[[], object]:
    def make() -> object:
        state = _model_state()
        first = next(iter(state))
        state[first].view(-1)[3] = value  # type: ignore[attr-defined]
        return state

    make.__name__ = f"poisoned_{value}"
    return make


def _inconsistent() -> object:
    """The model's state dict with one matrix of a shape no llama of its width has."""
    import torch

    state = _model_state()
    state["layers.0.attention.wq.weight"] = torch.zeros(100, 256)
    return state


def _wrong_heads() -> object:
    """A width of 200: no split into llama3-debug's 16 heads, and no saved config to say otherwise."""
    return _model_state(dim=200, heads=10)


def _other_model() -> object:
    import torch

    return {"embed.weight": torch.zeros(8, 4), "head.weight": torch.zeros(4, 8)}


def _a_list() -> object:
    import torch

    return [torch.zeros(2)]


def _dcp(
    folder: str, damage: Callable[[Path], None] | None, label: str, state: Callable[[], object] | None = None
) -> Callable[[Path], None]:
    """A DCP step folder of the model (or of `state`), then `damage`d."""

    def prepare(tmp: Path) -> None:
        from torch.distributed.checkpoint import state_dict_saver
        from torch.distributed.checkpoint.filesystem import FileSystemWriter

        path = tmp / folder
        model = _model_state() if state is None else state()
        state_dict_saver.save({"model": model}, storage_writer=FileSystemWriter(str(path)), no_dist=True)
        if damage is not None:
            damage(path)

    prepare.__name__ = f"dcp({folder}, {label})"
    return prepare


def _shards(path: Path) -> list[Path]:
    return sorted(path.glob("*.distcp"))


def _cut_shard(path: Path) -> None:
    shard = _shards(path)[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def _flip_tail(data: bytes) -> bytes:
    """Flip every bit of the last 64 bytes: the zip's central directory, where torch finds its records."""
    return data[:-64] + bytes(b ^ 0xFF for b in data[-64:])


CODE_PICKLE = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85q\x01Rq\x02."
GGUF_HEAD = b"GGUF" + (3).to_bytes(4, "little") + bytes(16)
PTE_HEAD = (28).to_bytes(4, "little") + b"ET12" + b"eh00" + bytes(52)
SAFETENSORS = (len(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')).to_bytes(8, "little") + b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' + bytes(4)  # fmt: skip

CHECKPOINTS = [
    BadInput("ckpt-empty", llm("--checkpoint", "c.pt"), "c.pt: the file is empty", files={"c.pt": b""}),
    BadInput("ckpt-random-bytes", llm("--checkpoint", "c.pt"), "c.pt: not a torch.save file",
             files={"c.pt": random.Random(49).randbytes(4096)}),
    BadInput("ckpt-text", llm("--checkpoint", "c.pt"), "c.pt: not a torch.save file (it begins b'model: l'",
             files={"c.pt": "model: llama\nweights: none\n"}),
    BadInput("ckpt-gguf", llm("--checkpoint", "m.gguf"), "m.gguf: a GGUF model (llama.cpp's format)", files={"m.gguf": GGUF_HEAD}),
    BadInput("ckpt-pte", llm("--checkpoint", "m.pte"), "m.pte: an ExecuTorch program", files={"m.pte": PTE_HEAD}),
    BadInput("ckpt-safetensors", llm("--checkpoint", "m.safetensors"), "m.safetensors: a safetensors file",
             files={"m.safetensors": SAFETENSORS}),
    BadInput("ckpt-three-bytes", llm("--checkpoint", "c.pt"), "c.pt: 3 bytes, shorter than any checkpoint", files={"c.pt": b"abc"}),
    BadInput("ckpt-code-pickle", llm("--checkpoint", "evil.pt"), "evil.pt holds a pickle that would run code",
             files={"evil.pt": CODE_PICKLE}),
    BadInput("ckpt-pickle-cut", llm("--checkpoint", "c.pt"), "c.pt is damaged", files={"c.pt": b"\x80\x02}q\x00(X"}),
    BadInput("ckpt-zip-cut", llm("--checkpoint", "c.pt"), "c.pt is damaged",
             prepare=_edited("c.pt", lambda data: data[: len(data) // 2], "half")),
    BadInput("ckpt-zip-flipped", llm("--checkpoint", "c.pt"), "c.pt is damaged", prepare=_edited("c.pt", _flip_tail, "tail flipped")),
    BadInput("ckpt-zip-head-only", llm("--checkpoint", "c.pt"), "c.pt is damaged", files={"c.pt": b"PK\x03\x04" + bytes(60)}),
    BadInput("ckpt-inconsistent-shapes", llm("--checkpoint", "c.pt"), "c.pt does not fit the llama model (RuntimeError",
             prepare=_saved("c.pt", _inconsistent)),
    BadInput("ckpt-heads-unknown", llm("--checkpoint", "c.pt"),
             "do not split into the preset's 16 heads, and no saved config beside it says its heads",
             prepare=_saved("c.pt", _wrong_heads)),
    BadInput("ckpt-other-model", llm("--checkpoint", "c.pt"), "c.pt does not fit the llama model (RuntimeError",
             prepare=_saved("c.pt", _other_model)),
    BadInput("ckpt-a-list", llm("--checkpoint", "c.pt"), "c.pt holds a list, not a state dict of tensors",
             prepare=_saved("c.pt", _a_list)),
    BadInput("ckpt-nan", llm("--checkpoint", "c.pt"), "c.pt has NaN or infinite weights in 1 tensor(s)",
             prepare=_saved("c.pt", _poisoned(float("nan")))),
    BadInput("ckpt-inf", llm("--checkpoint", "c.pt"), "c.pt has NaN or infinite weights in 1 tensor(s)",
             prepare=_saved("c.pt", _poisoned(float("-inf")))),
    BadInput("ckpt-dcp-no-metadata", llm("--checkpoint", "step"), "step has no .metadata", files={"step/__0_0.distcp": b"x"}),
    BadInput("ckpt-dcp-empty-metadata", llm("--checkpoint", "step"), "step is damaged or does not fit the llama model",
             files={"step/.metadata": b"", "step/__0_0.distcp": b"x"}),
    BadInput("ckpt-dcp-garbage-metadata", llm("--checkpoint", "step"), "step is damaged or does not fit the llama model",
             files={"step/.metadata": random.Random(7).randbytes(512)}),
    BadInput("ckpt-dcp-text-metadata", llm("--checkpoint", "step"), "step is damaged or does not fit the llama model",
             files={"step/.metadata": "{}"}),
    BadInput("ckpt-dcp-missing-shard", llm("--checkpoint", "step"), "step is damaged or does not fit the llama model",
             prepare=_dcp("step", lambda p: [s.unlink() for s in _shards(p)] and None, "shards removed")),
    BadInput("ckpt-dcp-cut-shard", llm("--checkpoint", "step"), "step is damaged or does not fit the llama model",
             prepare=_dcp("step", _cut_shard, "shard cut")),
    # DCP's CheckpointException (a BaseException) around the size mismatch: still one line
    BadInput("ckpt-dcp-inconsistent-shapes", llm("--checkpoint", "step"), "step is damaged or does not fit the llama model",
             prepare=_dcp("step", None, "wq 100x256", _inconsistent)),
    BadInput("ckpt-fifo", llm("--checkpoint", "c.pt"), "is not a regular file", prepare=lambda tmp: os.mkfifo(tmp / "c.pt")),
    BadInput("ckpt-missing", llm("--checkpoint", "none.pt"), "checkpoint none.pt not found"),
]  # fmt: skip

# --- --hf and --gguf: Hugging Face folders and GGUF files that are not a llama the suite can run -------------
HF = {"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4,
      "intermediate_size": 512, "vocab_size": 512}  # fmt: skip
HF_ACCEPTED = "accepted: a Hugging Face LlamaForCausalLM folder (config.json and *.safetensors)"


def hf_config(**changes: object) -> str:
    return json.dumps({k: v for k, v in {**HF, **changes}.items() if v is not None})


def _hf_weights(dim: int) -> Callable[[Path], None]:
    """hf/: config.json of HF's shape and one safetensors file of a model `dim` wide."""

    def prepare(tmp: Path) -> None:
        import torch
        from safetensors.torch import save_file

        save_file({"model.embed_tokens.weight": torch.zeros(512, dim)}, str(tmp / "hf" / "model.safetensors"))

    prepare.__name__ = f"hf_weights(dim={dim})"
    return prepare


def _gguf_of(arch: str) -> Callable[[Path], None]:
    """m.gguf: a valid GGUF of architecture `arch` (one tensor)."""

    def prepare(tmp: Path) -> None:
        import gguf
        import numpy as np

        writer = gguf.GGUFWriter(str(tmp / "m.gguf"), arch)
        writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    prepare.__name__ = f"gguf_of({arch})"
    return prepare


MODELS = [
    BadInput("hf-missing", llm("--hf", "none"), f"--hf none not found; {HF_ACCEPTED}"),
    BadInput("hf-a-file", llm("--hf", "c.json"), "--hf c.json is a file, not a folder", files={"c.json": "{}"}),
    BadInput("hf-no-config", llm("--hf", "hf"), "--hf hf has no config.json", files={"hf/model.safetensors": SAFETENSORS}),
    BadInput("hf-config-not-json", llm("--hf", "hf"), "config.json cannot be read as JSON", files={"hf/config.json": "{"}),
    BadInput("hf-config-no-width", llm("--hf", "hf"), "config.json: hidden_size: Field required",
             files={"hf/config.json": hf_config(hidden_size=None)}),
    BadInput("hf-architecture-gpt2", llm("--hf", "hf"), "architecture GPT2LMHeadModel is not a llama",
             files={"hf/config.json": hf_config(architectures=["GPT2LMHeadModel"])}),
    BadInput("hf-rope-yarn", llm("--hf", "hf"), "rope_scaling type 'yarn'; accepted: none, default or llama3",
             files={"hf/config.json": hf_config(rope_scaling={"rope_type": "yarn", "factor": 4.0})}),
    BadInput("hf-head-dim", llm("--hf", "hf"), "head_dim 32 with hidden_size 256 and 4 heads",
             files={"hf/config.json": hf_config(head_dim=32)}),
    BadInput("hf-biases", llm("--hf", "hf"), "accepted: silu without biases",
             files={"hf/config.json": hf_config(attention_bias=True)}),
    BadInput("hf-no-weights", llm("--hf", "hf"), "--hf hf has no *.safetensors file", files={"hf/config.json": hf_config()}),
    BadInput("hf-weights-not-safetensors", llm("--hf", "hf"), "model.safetensors is not a readable safetensors file",
             files={"hf/config.json": hf_config(), "hf/model.safetensors": b"not safetensors at all"}),
    BadInput("hf-wrong-shapes", llm("--hf", "hf"), "the weights do not fit its config.json",
             files={"hf/config.json": hf_config()}, prepare=_hf_weights(128)),
    BadInput("gguf-missing", llm("--gguf", "none.gguf"), "--gguf none.gguf not found"),
    BadInput("gguf-not-a-gguf", llm("--gguf", "m.gguf"), "--gguf m.gguf: not a GGUF file (it begins b'mode'",
             files={"m.gguf": "model: llama\n"}),
    BadInput("gguf-header-only", llm("--gguf", "m.gguf"), "--gguf m.gguf is damaged", files={"m.gguf": GGUF_HEAD[:12]}),
    BadInput("gguf-architecture-gpt2", llm("--gguf", "m.gguf"), "--gguf m.gguf: architecture 'gpt2'",
             prepare=_gguf_of("gpt2")),
    BadInput("gguf-and-checkpoint", llm("--gguf", "m.gguf", "--checkpoint", "c.pt"),
             "checkpoint and gguf are both set; accepted: one model source at a time"),
    BadInput("gguf-without-llama-cpp", ("edge", "llm", "--gguf", "m.gguf", "--runtimes", "mlx"),
             "edge.llm.gguf is set but edge.llm.runtimes are mlx; accepted: runtimes with llama.cpp",
             files={"m.gguf": GGUF_HEAD}),
]  # fmt: skip

NOTHING_MEASURED = [
    BadInput("llm-executorch-f16", ("edge", "llm", "--runtimes", "executorch", "--dtypes", "f16"),
             "nothing would be measured: runtimes executorch read none of the dtypes f16"),
    BadInput("llm-mlx-q8", ("edge", "llm", "--runtimes", "mlx", "--dtypes", "q8_0"),
             "nothing would be measured: runtimes mlx read none of the dtypes q8_0"),
    BadInput("llm-two-runtimes-q8", ("edge", "llm", "--runtimes", "mlx,executorch", "--dtypes", "q8_0"),
             "runtimes mlx, executorch read none of the dtypes q8_0"),
    BadInput("llm-executorch-f16-q8", ("edge", "llm", "--runtimes", "executorch", "--dtypes", "f16,q8_0"),
             "read none of the dtypes f16, q8_0"),
]  # fmt: skip


def baseline_set(run: str) -> tuple[str, ...]:
    return ("baseline", "--results-dir", "{tmp}/results", "set", "main", run)


STORED = [
    BadInput("baseline-of-empty-run", baseline_set("e"), "run 'e' holds no successful record with headline figures (no records)",
             files={"results/e/records.jsonl": ""}),
    BadInput("baseline-of-blank-lines", baseline_set("e"), "(no records)", files={"results/e/records.jsonl": "\n\n"}),
    BadInput("baseline-of-failed-run", baseline_set("f"), "(1 records, 1 failed)",
             files={"results/f/records.jsonl": failed_line("f")}),
    BadInput("baseline-of-failed-runs", baseline_set("f"), "(2 records, 2 failed)",
             files={"results/f/records.jsonl": failed_line("f") + failed_line("f")}),
    BadInput("baseline-of-no-figures", baseline_set("n"), "(1 records, 0 failed)", files={"results/n/records.jsonl": record_line("n")}),
    BadInput("baseline-of-folder-empty-run", ("baseline", "--results-dir", "{tmp}/results", "set", "main", "{tmp}/results/e"),
             "holds no successful record", files={"results/e/records.jsonl": ""}),
    BadInput("baseline-ok-only-rank-1", baseline_set("g"), "(1 records, 0 failed)",
             files={"results/g/records.jsonl": ok_line_with_figure("g").replace('"rank": 0', '"rank": 1')}),
]  # fmt: skip

EXISTING = {"results/p1/records.jsonl": ok_line_with_figure("p1")}
KEPT = [
    BadInput("run-id-exists-probe", ("probe", "--results-dir", "{tmp}/results", "--run-id", "p1"),
             "--run-id p1: run p1 already exists under", files=EXISTING),
    BadInput("run-id-exists-edge-llm", ("edge", "llm", "--results-dir", "{tmp}/results", "--run-id", "p1", "--runtimes", "llama.cpp"),
             "run p1 already exists", files=EXISTING),
    BadInput("run-id-exists-edge-run", ("edge", "run", "--results-dir", "{tmp}/results", "--run-id", "p1"),
             "run p1 already exists", files=EXISTING),
    BadInput("run-id-exists-train", ("train", "--results-dir", "{tmp}/results", "--run-id", "p1", "--steps", "1"),
             "run p1 already exists", files=EXISTING),
    BadInput("run-id-exists-set", ("probe", "--set", "run.results_dir={tmp}/results", "--set", "run.run_id=p1"),
             "run p1 already exists", files=EXISTING),
    BadInput("run-id-exists-empty-records", ("probe", "--results-dir", "{tmp}/results", "--run-id", "p1"),
             "run p1 already exists", files={"results/p1/records.jsonl": ""}),
    BadInput("history-png-user-file", ("history", FLOPS, "--results-dir", "{tmp}/results", "--png", "mine.csv"),
             "--png mine.csv: the file exists and was not written by this command; pass --force", files={"mine.csv": "a,b\n1,2\n"}),
    BadInput("history-png-user-png", ("history", FLOPS, "--results-dir", "{tmp}/results", "--png", "mine.png"),
             "--png mine.png: the file exists and was not written by this command",
             files={"mine.png": b"\x89PNG\r\n\x1a\n" + bytes(64)}),
    BadInput("history-png-empty-file", ("history", FLOPS, "--results-dir", "{tmp}/results", "--png", "e.png"),
             "the file exists and was not written by this command", files={"e.png": b""}),
    BadInput("compare-out-user-file", ("compare", "--results-dir", "{tmp}/results", "a", "b", "--out", "notes.md"),
             "--out notes.md: the file exists and was not written by this command", files={"notes.md": "# my notes\n"}),
    BadInput("compare-out-user-file-json", ("compare", "--results-dir", "{tmp}/results", "a", "b", "--format", "json", "--out", "x.json"),
             "--out x.json: the file exists", files={"x.json": "{}"}),
]  # fmt: skip

IMAGES = [
    BadInput(f"images-base-{label}", ("images", "build", "--variant", "cpu", "--base", value), "is not an image reference; accepted")
    for label, value in {
        "spaces": "not an image", "upper": "Nvidia/CUDA:12", "two-tags": "a:b:c", "empty": "", "url": "http://x/y",
        "long": "a" * 300, "trailing-slash": "nvidia/", "leading-slash": "/cuda", "bad-digest": "debian@sha256:xyz",
        "newline": "debian\n:12", "dots": "..", "tag-only": ":12",
    }.items()
]  # fmt: skip


def submit(*args: str) -> tuple[str, ...]:
    return ("slurm", "submit", "--local", "--results-dir", "{tmp}/results", *args)


SLURM = [
    BadInput("slurm-nodes-zero", submit("--nodes", "0"), "--nodes"),
    BadInput("slurm-nodes-negative", submit("--nodes", "-3"), "--nodes"),
    BadInput("slurm-nodes-huge", submit("--nodes", "99999999999"), "--nodes"),
    BadInput("slurm-gpus-negative", submit("--gpus-per-node", "-1"), "--gpus-per-node"),
    BadInput("slurm-gpus-huge", submit("--gpus-per-node", "70000"), "--gpus-per-node"),
    BadInput("slurm-steps-zero", submit("--steps", "0"), "--steps"),
    BadInput("slurm-steps-huge", submit("--steps", "100000000000"), "--steps"),
    BadInput("slurm-checkpoint-negative", submit("--checkpoint-every", "-1"), "--checkpoint-every"),
    BadInput("slurm-cpus-zero", submit("--cpus-per-task", "0"), "--cpus-per-task"),
    BadInput("slurm-time-words", submit("--time", "soon"), "--time 'soon' is not accepted"),
    BadInput("slurm-time-empty", submit("--time", ""), "--time '' is not accepted"),
    BadInput("slurm-time-newline", submit("--time", "10\n"), "--time '10\\n' is not accepted"),
    BadInput("slurm-partition-space", submit("--partition", "a b"), "--partition 'a b' is not accepted"),
    BadInput("slurm-partition-empty", submit("--partition", ""), "--partition '' is not accepted"),
    BadInput("slurm-preset-unknown", submit("--preset", "huge"), "--preset 'huge' is not accepted"),
    BadInput("slurm-nodes-text", submit("--nodes", "two"), "argument --nodes: invalid int value"),
    BadInput("slurm-timeout-zero", submit("--timeout", "0"), "argument --timeout: '0' is not accepted"),
    BadInput("slurm-timeout-nan", submit("--timeout", "nan"), "argument --timeout: 'nan' is not accepted"),
]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)
CONFIGS = [
    BadInput("config-anchor-bomb", ("probe", "--config", "c.yaml"), "holds more than 100000 values once YAML aliases are expanded",
             files={"c.yaml": BOMB + "probe:\n  matmul_sizes: *i\n"}),
    BadInput("config-anchor-bomb-top", ("probe", "--config", "c.yaml"), "holds more than 100000 values", files={"c.yaml": BOMB}),
    BadInput("config-huge-int", ("probe", "--config", "c.yaml"), "c.yaml: invalid YAML: Exceeds the limit",
             files={"c.yaml": "probe:\n  threads: " + "9" * 5000 + "\n"}),
    BadInput("config-huge-float", ("probe", "--config", "c.yaml"), "probe.threads", files={"c.yaml": "probe:\n  threads: 1e400\n"}),
    BadInput("config-huge-toml-int", ("probe", "--config", "c.toml"), "c.toml: ",
             files={"c.toml": "[probe]\nthreads = 99999999999999999999999\n"}),
    BadInput("config-section-is-list", ("probe", "--config", "c.yaml"), "run: a section holds keys", files={"c.yaml": "run: [1, 2]\n"}),
    BadInput("config-section-is-text", ("probe", "--config", "c.yaml"), "probe: a section holds keys", files={"c.yaml": "probe: fast\n"}),
    BadInput("config-threads-text", ("probe", "--config", "c.yaml"), "probe.threads", files={"c.yaml": "probe:\n  threads: many\n"}),
    BadInput("config-threads-list", ("probe", "--config", "c.yaml"), "probe.threads", files={"c.yaml": "probe:\n  threads: [1]\n"}),
    BadInput("config-results-dir-long", ("probe", "--config", "c.yaml"), "run.results_dir: 'rrrr",
             files={"c.yaml": f"run:\n  results_dir: {'r' * 300}\n"}),
    BadInput("config-results-dir-newline", ("probe", "--config", "c.yaml"), "run.results_dir: 'a\\nb' holds the control character",
             files={"c.yaml": 'run:\n  results_dir: "a\\nb"\n'}),
    BadInput("config-results-dir-deep", ("probe", "--config", "c.yaml"), "run.results_dir: ",
             files={"c.yaml": "run:\n  results_dir: " + "/".join(["d" * 250] * 17) + "\n"}),
    BadInput("config-run-id-long", ("probe", "--config", "c.yaml"), "run.run_id", files={"c.yaml": f"run:\n  run_id: {'r' * 300}\n"}),
    BadInput("config-spool-long", ("probe", "--config", "c.yaml"), "telemetry.spool_dir: ",
             files={"c.yaml": f"telemetry:\n  spool_dir: {'s' * 256}\n"}),
    BadInput("config-textfile-newline", ("probe", "--config", "c.yaml"), "telemetry.textfile_dir: ",
             files={"c.yaml": 'telemetry:\n  textfile_dir: "t\\tt"\n'}),
    BadInput("config-self-alias", ("probe", "--config", "c.yaml"), "c.yaml: ", files={"c.yaml": "a: &a [*a]\n"}),
    BadInput("config-deep-nesting", ("probe", "--config", "c.yaml"), "c.yaml: ", files={"c.yaml": "a: " + "[" * 5000 + "]" * 5000 + "\n"}),
    BadInput("config-bool-threads", ("probe", "--config", "c.yaml"), "probe.threads", files={"c.yaml": "probe:\n  threads: yes\n"}),
    BadInput("config-negative-threads", ("probe", "--config", "c.yaml"), "probe.threads", files={"c.yaml": "probe:\n  threads: -4\n"}),
    BadInput("config-toml-results-dir-long", ("probe", "--config", "c.toml"), "run.results_dir: ",
             files={"c.toml": f'[run]\nresults_dir = "{"x" * 400}"\n'}),
]  # fmt: skip

SETS = [
    BadInput("set-results-dir-long", ("probe", "--set", "run.results_dir=" + "r" * 300), "run.results_dir: 'rrrr"),
    BadInput("set-results-dir-wide", ("probe", "--set", "run.results_dir=" + "é" * 150), "has a component of 300 bytes"),
    BadInput("set-results-dir-deep", ("probe", "--set", "run.results_dir=" + "/".join(["d" * 250] * 17)), "bytes long; accepted: a path"),
    BadInput("set-results-dir-tab", ("probe", "--set", "run.results_dir=a\tb"), "holds the control character \\t"),
    BadInput("set-spool-long", ("probe", "--set", "telemetry.spool_dir=" + "s" * 256), "telemetry.spool_dir: "),
    BadInput("set-textfile-esc", ("probe", "--set", "telemetry.textfile_dir=a\x1bb"), "character #x001b is not allowed"),
    BadInput("set-run-id-long", ("probe", "--set", "run.run_id=" + "r" * 300), "run.run_id"),
    BadInput("set-run-id-slash", ("probe", "--set", "run.run_id=a/b"), "run.run_id"),
    BadInput("set-run-id-dotdot", ("probe", "--set", "run.run_id=.."), "run.run_id"),
    BadInput("set-threads-huge", ("probe", "--set", "probe.threads=" + "9" * 4301), "probe.threads="),
    BadInput("set-threads-inf", ("probe", "--set", "probe.threads=.inf"), "probe.threads"),
    BadInput("set-threads-map", ("probe", "--set", "probe.threads={a: 1}"), "probe.threads"),
    BadInput("set-section-value", ("probe", "--set", "probe=3"), "probe"),
    BadInput("set-key-under-value", ("probe", "--set", "probe.threads=2", "--set", "probe.threads.x=1"), "is a value, not a section"),
    BadInput("set-empty-key-part", ("probe", "--set", "probe..threads=1"), "is not accepted: use SECTION.KEY=VALUE"),
    BadInput("set-alias-bomb", ("probe", "--set", "probe.matmul_sizes=" + "[" * 3000), "probe.matmul_sizes="),
    BadInput("set-edge-llm-checkpoint-long", ("edge", "llm", "--set", "edge.llm.checkpoint=" + "c" * 300), "edge.llm.checkpoint: "),
    BadInput("set-edge-llm-checkpoint-tab", ("edge", "llm", "--set", "edge.llm.checkpoint=a\tb"), "edge.llm.checkpoint: "),
]  # fmt: skip


def _loop(name: str) -> Callable[[Path], None]:
    def prepare(tmp: Path) -> None:
        (tmp / name).symlink_to(tmp / name)

    prepare.__name__ = f"loop({name})"
    return prepare


RESULTS_DIRS = [
    BadInput(f"results-{kind}-{command}", (*args, "--results-dir", "{tmp}/r"), fragment, files=files, prepare=prepare)
    for command, args in {
        "probe": ("probe",),
        "edge-llm": ("edge", "llm", "--runtimes", "llama.cpp"),
        "history": ("history", FLOPS),
        "compare": ("compare", "a", "b"),
        "baseline-set": ("baseline", "set", "main", "a"),
        "baseline-list": ("baseline", "list"),
        "results-list": ("results", "list"),
        "report": ("report", "--offline"),
    }.items()
    for kind, fragment, files, prepare in (
        ("file", "{tmp}/r", {"r": "not a folder\n"}, None),
        ("loop", "{tmp}/r", {}, _loop("r")),
    )
]


HELD: list[object] = []


def _hold(*ports: int) -> Callable[[Path], None]:
    """A prepare step: another program (a plain listening socket, no HTTP) holds these loopback ports."""

    def prepare(_tmp: Path) -> None:
        import socket

        for port in ports:
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
                sock.listen()
            except OSError:  # held by something else already: taken all the same
                sock.close()
                continue
            HELD.append(sock)

    def release(_tmp: Path) -> None:
        while HELD:
            HELD.pop().close()  # type: ignore[attr-defined]

    prepare.__name__ = f"hold({', '.join(map(str, ports))})"
    prepare.undo = release  # type: ignore[attr-defined]
    return prepare


DEMO_ENV = {"FLEETBENCH_STATE_DIR": "{tmp}/../demo-state", "FLEETBENCH_PROMETHEUS_PORT": "39190",
            "FLEETBENCH_PUSHGATEWAY_PORT": "39191"}  # fmt: skip
DEMO = [
    BadInput("demo-prometheus-port-taken", ("demo", "--results-dir", "{tmp}/results"),
             "port 39190 on 127.0.0.1 is taken by another program, so prometheus cannot start there; free it or "
             "choose another port (FLEETBENCH_PROMETHEUS_PORT)", env=DEMO_ENV, prepare=_hold(39190)),
    BadInput("demo-pushgateway-port-taken", ("demo", "--results-dir", "{tmp}/results"),
             "port 39191 on 127.0.0.1 is taken by another program, so pushgateway cannot start there",
             env=DEMO_ENV, prepare=_hold(39191)),
    BadInput("demo-both-ports-taken", ("demo", "--results-dir", "{tmp}/results"), "so pushgateway cannot start there",
             env=DEMO_ENV, prepare=_hold(39190, 39191)),
]  # fmt: skip


HOSTILE = [
    BadInput("history-results-missing", ("history", FLOPS, "--results-dir", "nowhere"),
             "results folder nowhere does not exist"),
    BadInput("history-results-is-file", ("history", FLOPS, "--results-dir", "f"), "results folder f is not a folder",
             files={"f": "x"}),
    BadInput("history-results-loop", ("history", FLOPS, "--results-dir", "loop"),
             "results folder loop is a symbolic link that leads nowhere", prepare=_loop("loop")),
    BadInput("results-list-loop", ("results", "list", "--results-dir", "loop"),
             "results folder loop is a symbolic link that leads nowhere", prepare=_loop("loop")),
    BadInput("report-compare-empty", ("report", "--offline", "--compare", ""), "argument --compare: an empty path"),
    BadInput("report-compare-long", ("report", "--offline", "--compare", "x" * 5000), "argument --compare: 'xxxx"),
    BadInput("report-compare-newline", ("report", "--offline", "--compare", "a\nb"), "argument --compare: 'a\\nb' holds"),
    BadInput("report-strict-without-compare", ("report", "--offline", "--strict"), "--strict apply to --compare BASE",
             files={"results/a/records.jsonl": record_line("a")}),
    BadInput("ckpt-dev-null", llm("--checkpoint", "/dev/null"), "checkpoint /dev/null is not a regular file"),
    BadInput("ckpt-loop", llm("--checkpoint", "loop"), "checkpoint loop cannot be read (Too many levels of symbolic links)",
             prepare=_loop("loop")),
]  # fmt: skip


CASES = [
    *HOSTILE,
    *DEMO,
    *CHECKPOINTS,
    *MODELS,
    *NOTHING_MEASURED,
    *STORED,
    *KEPT,
    *IMAGES,
    *SLURM,
    *CONFIGS,
    *SETS,
    *RESULTS_DIRS,
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_round_four_bad_input_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    work = tmp_path / "work"
    if "{tmp}" in case.fragment:
        import dataclasses

        case = dataclasses.replace(case, fragment=case.fragment.replace("{tmp}", str(work)))
    check(case, work, tmp_path / "home")
