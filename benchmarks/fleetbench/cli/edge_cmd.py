"""`fleetbench edge run|export|info`: kernels on edge GPUs through wgpu, the MPS path, ExecuTorch programs."""

from __future__ import annotations

import argparse
import logging
import platform
from pathlib import Path

from rich.console import Console

from fleetbench import jsonio
from fleetbench.cli.flags import Flag, add_flags
from fleetbench.cli.options import (
    add_run_options,
    config_from_args,
    print_record_path,
    run_context,
    shown_even_if_failed,
)
from fleetbench.errors import UserError
from fleetbench.names import shown

log = logging.getLogger(__name__)

BACKEND_HELP = "auto, vulkan, metal, d3d12 or opengl (default: auto, or $WGPU_BACKEND_TYPE)"


def _list(text: str | None, flag: str, none_word: str | None = None) -> list[str] | None:
    if text is None:
        return None
    if none_word is not None and text.strip() == none_word:
        return []
    items = [part.strip() for part in text.split(",")]
    if not any(items):
        raise UserError(f"{flag} {text!r} is empty; accepted: a comma-separated list")
    if not all(items):  # 'a,,b' or 'a,': a value left out by mistake, not silently dropped
        raise UserError(f"{flag} {shown(text)} has an empty item; accepted: a comma-separated list of names, e.g. a,b")
    return items


def _ints(text: str | None, flag: str) -> list[int] | None:
    items = _list(text, flag)
    if items is None:
        return None
    try:
        return [int(item) for item in items]
    except ValueError:
        raise UserError(f"{flag} {text!r} is not accepted; accepted: CPU numbers like 0,1") from None


def _kernels(text: str, flag: str) -> list[str] | None:
    return _list(text, flag, "none")


def _listed(text: str, flag: str) -> list[str] | None:
    return _list(text, flag)


def _partitioners(text: str, flag: str) -> list[str] | None:
    names = _list(text, flag)
    return None if names == ["all"] else names  # all: every partitioner, skipping what this host cannot lower


RUN_FLAGS = (
    Flag("--backend", "edge.backend", BACKEND_HELP, example="vulkan"),
    Flag("--adapter", "edge.adapter", "pick the adapter whose name contains NAME", example="llvmpipe", metavar="NAME"),
    Flag(
        "--kernels",
        "edge.kernels",
        "comma-separated kernel names, or 'none' (see edge info)",
        example="copy,silu",
        metavar="LIST",
        convert=_kernels,
    ),
    Flag(
        "--dtypes",
        "edge.dtypes",
        "float32,float16 (default: float16 where shader-f16 exists)",
        example="float32",
        metavar="LIST",
        convert=_listed,
    ),
    Flag("--timing", "edge.timing", "auto, timestamp or wallclock (default: auto)", example="wallclock"),
    Flag(
        "--pte",
        "edge.pte",
        "also time this ExecuTorch program (alone unless --kernels)",
        example="model.pte",
        type=Path,
        metavar="FILE",
    ),
    Flag(
        "--module",
        "edge.module",
        "eager reference for --pte without a sidecar",
        example="pkg.models:build",
        metavar="PKG.MODULE:FACTORY",
    ),
    Flag(
        "--cpu-affinity",
        "edge.cpu_affinity",
        "CPUs the host process may run on, e.g. 0,1 (Linux)",
        example="0",
        metavar="LIST",
        convert=_ints,
    ),
)
EXPORT_FLAGS = (
    Flag(
        "--module",
        "edge.module",
        "factory returning (module, example_inputs)",
        example="pkg.models:build",
        metavar="PKG.MODULE:FACTORY",
    ),
    Flag(
        "--partitioners",
        "edge.partitioners",
        "xnnpack,vulkan,coreml,mps, or 'all' (skips what this host cannot lower)",
        example="xnnpack,vulkan",
        metavar="LIST",
        convert=_partitioners,
    ),
)
LLM_FLAGS = (
    Flag("--preset", "edge.llm.preset", "llama3-debug (default) or llama3-8b", example="llama3-8b"),
    Flag(
        "--checkpoint",
        "edge.llm.checkpoint",
        "a trainer checkpoint of any llama shape (default: a fresh init)",
        example="results/r1/checkpoints/step-2",
        type=Path,
        metavar="PATH",
    ),
    Flag(
        "--hf",
        "edge.llm.hf",
        "a Hugging Face llama folder (config.json + *.safetensors), exported to every runtime",
        example="models/TinyLlama",
        type=Path,
        metavar="DIR",
    ),
    Flag(
        "--gguf",
        "edge.llm.gguf",
        "an existing llama GGUF, run by llama.cpp as it is (the other runtimes are left out)",
        example="models/model-q4_k_m.gguf",
        type=Path,
        metavar="FILE",
    ),
    Flag(
        "--runtimes",
        "edge.llm.runtimes",
        "llama.cpp,mlx,executorch (default: all three)",
        example="llama.cpp,mlx",
        metavar="LIST",
        convert=_listed,
    ),
    Flag(
        "--dtypes",
        "edge.llm.dtypes",
        "f32,f16,q8_0,q4_0,q4_k_m,int4 (default: all; q8_0/q4_0/q4_k_m are llama.cpp's, int4 MLX's)",
        example="f32,q8_0",
        metavar="LIST",
        convert=_listed,
    ),
    Flag(
        "--prompt-tokens",
        "edge.llm.prompt_tokens",
        "pp: prompt length (default 128)",
        example="64",
        type=int,
        metavar="N",
    ),
    Flag(
        "--gen-tokens", "edge.llm.gen_tokens", "tg: tokens generated (default 32)", example="16", type=int, metavar="N"
    ),
    Flag(
        "--backend",
        "edge.llm.llamacpp_backends",
        "llama.cpp builds side by side: cpu, vulkan or cpu,vulkan (default: cpu, and vulkan where built)",
        example="vulkan",
        metavar="LIST",
        convert=_listed,
    ),
    Flag(
        "--gpu-layers",
        "edge.llm.gpu_layers",
        "layers llama.cpp offloads on a GPU backend (default: all)",
        example="0",
        type=int,
        metavar="N",
    ),
    Flag(
        "--threads",
        "edge.llm.threads",
        "CPU threads (default: the CPUs this process may use)",
        example="2",
        type=int,
        metavar="N",
    ),
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `edge run`, `edge export` and `edge info`."""
    parser = commands.add_parser("edge", help="edge GPUs: Vulkan/Metal kernels through wgpu, MPS, ExecuTorch")
    sub = parser.add_subparsers(dest="edge_command", required=True, metavar="SUBCOMMAND", parser_class=type(parser))

    run = sub.add_parser("run", help="run the kernel set on this machine's GPU adapter (lavapipe here)")
    add_run_options(run)
    group = add_flags(run, RUN_FLAGS, "edge")
    group.add_argument("--quick", action="store_true", help="a small set that takes seconds (smoke test, demo)")
    run.set_defaults(handler=handle_run)

    export = sub.add_parser("export", help="export the trainer's tiny model (or --module) to .pte with ExecuTorch")
    add_run_options(export)
    group = add_flags(export, EXPORT_FLAGS, "export")
    group.add_argument("--out-dir", type=Path, metavar="DIR", help="where the .pte files go (default: RESULTS/models)")
    export.set_defaults(handler=handle_export)

    llm = sub.add_parser(
        "llm",
        help="the llama model exported to llama.cpp (GGUF), MLX and ExecuTorch, side by side: pp/tg tok/s, TTFT, load, RSS",
    )
    add_run_options(llm)
    group = add_flags(llm, LLM_FLAGS, "llm")
    group.add_argument("--quick", action="store_true", help="pp32 tg8, 2-3 tries: seconds (smoke test, demo)")
    llm.set_defaults(handler=handle_llm)

    info = sub.add_parser("info", help="describe the adapters: features, limits, cooperative matrix, runtimes")
    info.add_argument("--backend", help=BACKEND_HELP)
    info.add_argument("--adapter", metavar="NAME", help="the adapter whose name contains NAME")
    info.add_argument("--json", action="store_true", help="print the selected adapter's full report as JSON")
    info.set_defaults(handler=handle_info)


def handle_run(args: argparse.Namespace, console: Console) -> int:
    """Run the edge job; with --pte and no kernels chosen, time the program alone."""
    config = config_from_args(args)
    from fleetbench.edge import run as edge_job  # wgpu and numpy load only when a run really starts
    from fleetbench.edge.plan import quick

    edge = config.edge
    if args.quick:
        edge = quick(edge)
    if edge.pte is not None and "kernels" not in edge.model_fields_set:
        edge = edge.model_copy(update={"kernels": []})
    from fleetbench.cli.views.edge import show_results

    context = run_context(config, console)
    with shown_even_if_failed(console, show_results):
        result = edge_job.run(config.model_copy(update={"edge": edge}), context)
    show_results(console, result.view)
    print_record_path(console, result.record, context.results_dir)
    return 0


def handle_llm(args: argparse.Namespace, console: Console) -> int:
    """Export the llama model and run it in each edge LLM runtime; a runtime that disagrees with eager fails."""
    config = config_from_args(args)
    if args.quick:
        quick = {"prompt_tokens": 32, "gen_tokens": 8, "min_tries": 2, "max_tries": 3}
        llm_cfg = config.edge.llm.model_copy(
            update={k: v for k, v in quick.items() if k not in config.edge.llm.model_fields_set}
        )
        config = config.model_copy(update={"edge": config.edge.model_copy(update={"llm": llm_cfg})})
    from fleetbench.cli.views.edge_llm import show_llm
    from fleetbench.edge.llm import job

    context = run_context(config, console)
    with shown_even_if_failed(console, show_llm):
        result = job.run(config, context)
    show_llm(console, result.view)
    print_record_path(console, result.record, context.results_dir)
    return 0


def handle_export(args: argparse.Namespace, console: Console) -> int:
    """Export the model to one .pte per partitioner; partitioners named explicitly must all work.

    With `all` (or the config's list), a partitioner this host cannot lower to is skipped with a
    warning; no program at all is a UserError.
    """
    names = _list(args.partitioners, "--partitioners")
    strict = names is not None and names != ["all"]
    config = config_from_args(args)
    edge = config.edge
    from fleetbench.edge import pte
    from fleetbench.edge.model_factory import build
    from fleetbench.fsutil import ensure_writable_dir

    pte.require_executorch()
    partitioners = list(pte.PARTITIONERS) if names == ["all"] else list(edge.partitioners)
    out_dir = args.out_dir or config.run.results_dir / "models"
    if strict:
        pte.refuse_unavailable({name: pte.partitioner_problem(name) for name in partitioners})
    with console.status("building the model ...") as status:
        built = build(edge.module, edge.seed, edge.model_batch)
        ensure_writable_dir(out_dir, "export folder", "--out-dir DIR")
        log.info("model %s (%s); torch.export + to_edge_transform_and_lower ...", built.name, built.spec)
        status.update("torch.export ...")
        results = pte.export(
            built, partitioners, out_dir, edge.seed, edge.model_batch, strict=strict, on_step=status.update
        )
    for result in results:
        if result.path is None:
            log.warning("skipped %s", result.skipped)
        else:
            delegated = f"{result.delegated} delegated subgraph(s)" if result.delegated else "nothing delegated"
            console.print(f"wrote {result.path} ({result.partitioner}, {delegated}, {result.seconds:.1f} s)")
    if not any(r.path for r in results):
        raise UserError("no program exported: this host can lower to none of " + ", ".join(partitioners))
    return 0


def handle_info(args: argparse.Namespace, console: Console) -> int:
    """List the adapters (the selected one starred), its limits and the runtimes; --json: its full report."""
    from fleetbench.edge import gpu, kernels, spirv

    backend = gpu.resolve_backend(args.backend or "auto")
    chosen = gpu.report(gpu.select_adapter(backend, args.adapter, "high-performance"))
    if args.json:
        print(jsonio.dumps(chosen.as_dict(), indent=2))
        return 0
    for adapter in gpu.enumerate_adapters(backend):
        rep = gpu.report(adapter)
        mark = "*" if (rep.device, rep.backend) == (chosen.device, chosen.backend) else " "
        features = ", ".join(f"{f} {'yes' if rep.has(f) else 'no'}" for f in gpu.KEY_FEATURES)
        console.print(
            f"{mark} [bold]{rep.device}[/] ({rep.backend}, {rep.adapter_type}), vendor {rep.vendor}, "
            f"driver {rep.driver}\n    {features}"
        )
    limits = ", ".join(f"{k}={chosen.limits[k]}" for k in gpu.KEY_LIMITS if k in chosen.limits)
    console.print(f"* selected; limits: {limits}")
    if chosen.backend == "vulkan":
        coop = ", ".join(
            f"{k}: {'unknown' if v is None else 'yes' if v else 'no'}" for k, v in chosen.cooperative_matrix.items()
        )
        console.print(f"  Vulkan {chosen.vulkan_api or '?'} (extension list via libvulkan): {coop}")
    console.print(f"  kernels: {', '.join(kernels.KERNELS)}; glslc: {spirv.glslc() or 'not found'}")
    executorch = _version("executorch") or "not installed (extra \\[mobile])"  # \\[: the text, not rich markup
    console.print(f"  executorch: {executorch}; mps: {_mps_line()}")
    llm = ", ".join(f"{name} {_version(package) or 'not installed'}" for name, package in LLM_PACKAGES.items())
    # The machine, as the kernel names it (uname -m): an arm64 board, or an arm64 image under qemu.
    console.print(f"  architecture: {platform.machine()}; edge llm runtimes: {llm}")
    return 0


LLM_PACKAGES = {"llama.cpp": "llama-cpp-python", "mlx": "mlx"}


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _mps_line() -> str:
    import sys

    from fleetbench.edge import mps

    if sys.platform != "darwin":
        return f"no ({mps.SKIP_REASON})"
    return "yes" if mps.mps_available() else f"no ({mps.SKIP_REASON})"
