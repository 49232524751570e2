"""`fleetbench images`: build, list, run, save and load the suite's container images (Docker SDK)."""

from __future__ import annotations

import argparse
import logging
import os
import re
from pathlib import Path

from rich.console import Console

from fleetbench.cli.options import add_results_dir
from fleetbench.envvars import IMAGE_NAMESPACE_ENV, PUSHGATEWAY_ENV
from fleetbench.errors import UserError
from fleetbench.images.specs import ARCHES, DEFAULT_ARCH, DEFAULT_NAMESPACE, IMAGES, VARIANTS
from fleetbench.results.store import DEFAULT_RESULTS_DIR
from fleetbench.urls import url_from

log = logging.getLogger(__name__)

NAMESPACE_PATTERN = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
# An image reference as docker's distribution/reference grammar spells it: [host[:port]/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
MAX_NAMESPACE = 255 - len("/node-exporter")  # docker: a repository name is at most 255 characters
# an apt package as Debian names it, with an optional =VERSION; '' for none
APT_PACKAGE = re.compile(r"^(?:[a-z0-9][a-z0-9+.-]{1,99}(?:=[A-Za-z0-9.+:~_-]{1,100})?)?$")
IMAGE_REFERENCE_RULE = (
    "an image reference [HOST[:PORT]/]NAME[:TAG][@DIGEST], e.g. nvidia/cuda:12.8.1-runtime-ubuntu24.04"
)


def check_image_reference(value: str, flag: str) -> str:
    """`value` when it is an image reference docker would take (at most 255 characters); else a UserError."""
    from fleetbench.names import shown

    if len(value) > 255 or not IMAGE_REFERENCE.fullmatch(value):
        raise UserError(f"{flag} {shown(value)} is not an image reference; accepted: {IMAGE_REFERENCE_RULE}")
    return value


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `images build|base|list|run|save|load`."""
    parser = commands.add_parser("images", help="container images: build, list, run, save, load (Docker SDK)")
    sub = parser.add_subparsers(dest="images_command", required=True, metavar="{build,base,list,run,save,load}")
    names = ", ".join(IMAGES)

    build = sub.add_parser("build", help="build images (default: every image of the variant)")
    build.add_argument("names", nargs="*", metavar="NAME", help=f"images to build: {names}")
    build.add_argument(
        "--variant",
        choices=VARIANTS,
        default="cuda",
        help="cuda (default): torch's CUDA build; trainer and profiler on the offline base; cpu: all offline",
    )
    build.add_argument("--context", type=Path, help="build context, the repository root (default: this checkout)")
    build.add_argument(
        "--base",
        dest="base_image",
        metavar="IMAGE",
        help="override BASE_IMAGE of the images, e.g. nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 (needs a registry)",
    )
    build.add_argument(
        "--base-python", metavar="X.Y", help="the Python of --base where the suite does not know it (default 3.11)"
    )
    build.add_argument(
        "--nsight-compute",
        metavar="PACKAGE",
        help="apt package of Nsight Compute for the profiler ('' for none; default: on NVIDIA's base only)",
    )
    build.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    _arch(build)
    _namespace(build)
    build.set_defaults(handler=handle_build)

    base = sub.add_parser("base", help="make the local offline base of the cpu variants (debootstrap + import)")
    base.add_argument("--rebuild", action="store_true", help="make it again even when it exists")
    _arch(base)
    _namespace(base)
    base.set_defaults(handler=handle_base)

    listing = sub.add_parser("list", help="the suite's images on this engine, with sizes")
    _namespace(listing)
    listing.set_defaults(handler=handle_list)

    run = sub.add_parser(
        "run",
        help="run a benchmark image with results mounted back into --results-dir",
        usage="fleetbench images run NAME [options] [-- ARGS...]",
    )
    run.add_argument("name", metavar="NAME", help="trainer, profiler or edge-vulkan")
    _add_run_options(run)
    run.add_argument("rest", nargs=argparse.REMAINDER, metavar="-- ARGS", help="arguments for the image's entrypoint")
    run.set_defaults(handler=handle_run)

    save = sub.add_parser("save", help="write images (all their tags) to a tar archive")
    save.add_argument("names", nargs="+", metavar="NAME")
    save.add_argument("-o", "--output", required=True, metavar="FILE", help="archive path, or - for stdout")
    save.add_argument("--variant", choices=VARIANTS, help="default: cuda when present, else cpu")
    _namespace(save)
    save.set_defaults(handler=handle_save)

    load = sub.add_parser("load", help="load images from an archive written by `images save`")
    load.add_argument("-i", "--input", default="-", metavar="FILE", help="archive path, or - for stdin (default)")
    load.set_defaults(handler=handle_load)


def _arch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--arch",
        choices=tuple(ARCHES),
        default=DEFAULT_ARCH,
        help="image architecture (default amd64); arm64: the edge runner for arm64 boards, emulated by "
        "qemu-user-static on other hosts (tags end in -arm64)",
    )


def _add_run_options(parser: argparse.ArgumentParser, defaults: argparse.Namespace | None = None) -> None:
    def default(name: str, fallback: object) -> object:
        return getattr(defaults, name, fallback) if defaults is not None else fallback

    parser.add_argument(
        "--variant",
        choices=VARIANTS,
        default=default("variant", None),
        help="default: cuda when present (or with --gpus), else cpu",
    )
    parser.add_argument(
        "--tag", default=default("tag", None), help="run NAMESPACE/NAME:TAG instead of the latest build"
    )
    results = default("results_dir", DEFAULT_RESULTS_DIR)
    add_results_dir(parser, "host folder mounted as the image's results/", default=Path(str(results)))
    parser.add_argument(
        "--pushgateway",
        metavar="URL",
        default=default("pushgateway", None),
        help=f"Pushgateway for the run (default: ${PUSHGATEWAY_ENV})",
    )
    parser.add_argument(
        "--gpus", default=default("gpus", None), help="GPUs through the NVIDIA runtime: all, a count or ids (0,1)"
    )
    parser.add_argument(
        "--device",
        dest="devices",
        action="append",
        default=list(default("devices", [])),  # type: ignore[call-overload]
        metavar="PATH",
        help="pass a host device, e.g. /dev/dri for Mesa's Vulkan drivers (repeatable)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=list(default("env", [])),  # type: ignore[call-overload]
        metavar="NAME=VALUE",
        help="environment (repeatable)",
    )
    parser.add_argument(
        "--namespace",
        default=default("namespace", None),
        help=f"image repository prefix (default: ${IMAGE_NAMESPACE_ENV} or {DEFAULT_NAMESPACE})",
    )
    parser.add_argument(
        "--ncu-dir",
        type=Path,
        default=default("ncu_dir", None),
        metavar="DIR",
        help="profiler: the host's Nsight Compute install (holds ncu), mounted read-only and on the PATH",
    )


def split_run_arguments(args: argparse.Namespace) -> tuple[argparse.Namespace, list[str]]:
    """`images run NAME [options] [--] [ARGS]`: leading --options after NAME are ours (each takes a
    value), up to `--` or the first other word; the rest goes to the image's entrypoint."""
    rest = list(args.rest)
    cut = 0
    while cut < len(rest) and rest[cut].startswith("-") and rest[cut] != "--":
        cut += 1 if "=" in rest[cut] else 2
    cut = min(cut, len(rest))
    program = rest[cut + 1 :] if rest[cut : cut + 1] == ["--"] else rest[cut:]
    if cut == 0:
        return args, program
    from fleetbench.cli.parser import OneLineParser

    parser = OneLineParser(prog="fleetbench images run NAME", add_help=False)
    _add_run_options(parser, defaults=args)
    options = parser.parse_args(rest[:cut])
    options.name = args.name
    return options, program


def _namespace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--namespace",
        default=None,
        help=f"image repository prefix (default: ${IMAGE_NAMESPACE_ENV} or {DEFAULT_NAMESPACE})",
    )


def _print_table(console: Console, table: object) -> None:
    """Whole image names in logs and pipes too (no terminal: rich would cut them at 80 columns)."""
    if not console.is_terminal:
        console = Console(file=console.file, width=max(console.width, 160), highlight=False)
    console.print(table)


def namespace_of(args: argparse.Namespace) -> str:
    """The image repository prefix: --namespace, $FLEETBENCH_IMAGE_NAMESPACE or the default; checked."""
    if args.namespace is not None and not args.namespace:  # '' would silently mean the default
        raise UserError("--namespace '' is empty; accepted: lowercase letters, digits, '.', '_', '-', '/'")
    value = args.namespace or os.environ.get(IMAGE_NAMESPACE_ENV) or DEFAULT_NAMESPACE
    if not NAMESPACE_PATTERN.fullmatch(value):
        raise UserError(f"image namespace {value!r} is not accepted; use lowercase letters, digits, '.', '_', '-', '/'")
    if len(value) > MAX_NAMESPACE:
        from fleetbench.names import shown

        raise UserError(
            f"image namespace {shown(value)} is {len(value)} characters long; accepted: at most {MAX_NAMESPACE} "
            "(a repository name holds 255 with the image's own name)"
        )
    return value


def handle_build(args: argparse.Namespace, console: Console) -> int:
    """Build the named images (default: all of the variant) and print what was built."""
    namespace = namespace_of(args)
    if args.base_image is not None:
        check_image_reference(args.base_image, "--base")
    if args.base_python is not None:  # '' would silently mean the default Python
        from fleetbench.images.specs import check_python

        check_python(args.base_python)
    if args.nsight_compute is not None and not APT_PACKAGE.fullmatch(args.nsight_compute):
        raise UserError(
            f"--nsight-compute {args.nsight_compute[:60]!r} is not accepted; accepted: an apt package name "
            "(lowercase letters, digits, '+', '-', '.'; optionally =VERSION), e.g. cuda-nsight-compute-12-8, or '' for none"
        )
    from fleetbench.cli.views.images import results_table
    from fleetbench.images.build import build_images
    from fleetbench.progress import ConsoleProgress

    results = build_images(
        args.names,
        args.variant,
        progress=ConsoleProgress(console),
        context=args.context,
        namespace=namespace,
        base_image=args.base_image,
        base_python=args.base_python,
        nsight_compute=args.nsight_compute,
        no_cache=args.no_cache,
        arch=args.arch,
    )
    _print_table(console, results_table(results))
    return 0


def handle_base(args: argparse.Namespace, console: Console) -> int:
    """Make the offline base image of the cpu variants unless it exists (or --rebuild)."""
    namespace = namespace_of(args)
    from fleetbench.images.base import ensure_base
    from fleetbench.images.build import default_context
    from fleetbench.images.engine import connect
    from fleetbench.progress import ConsoleProgress

    ref, built = ensure_base(
        connect(),
        namespace,
        default_context() / "build",
        rebuild=args.rebuild,
        progress=ConsoleProgress(console),
        arch=args.arch,
    )
    if not built:
        log.info("%s is up to date (--rebuild makes it again)", ref)
    return 0


def handle_list(args: argparse.Namespace, console: Console) -> int:
    """Print a table of the namespace's image tags on this engine."""
    namespace = namespace_of(args)
    from rich.table import Table

    from fleetbench.images.engine import connect

    client = connect()
    table = Table(title=f"images in {namespace}/")
    for column in ("repository:tag", "id", "size", "created"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for image in sorted(client.images.list(), key=lambda i: i.tags[0] if i.tags else ""):
        for tag in sorted(image.tags):
            if tag.startswith(namespace + "/"):
                created = str(image.attrs.get("Created", ""))[:19]
                table.add_row(
                    tag, image.short_id.removeprefix("sha256:"), f"{image.attrs['Size'] / 1e6:.0f} MB", created
                )
    _print_table(console, table)
    return 0


def handle_run(args: argparse.Namespace, console: Console) -> int:
    """Run a benchmark image; the exit status is the container's."""
    args, program = split_run_arguments(args)
    namespace = namespace_of(args)
    from fleetbench.images.container import parse_env, run_image

    example = "http://127.0.0.1:9091"
    if args.pushgateway:  # what the container's fleetbench pushes to: checked here, before anything starts
        args.pushgateway = url_from(args.pushgateway, "--pushgateway", example)
    elif os.environ.get(PUSHGATEWAY_ENV):
        url_from(os.environ[PUSHGATEWAY_ENV], f"${PUSHGATEWAY_ENV}", example)

    return run_image(
        args.name,
        program,
        namespace=namespace,
        variant=args.variant,
        tag=args.tag,
        results_dir=args.results_dir,
        pushgateway=args.pushgateway,
        gpus=args.gpus,
        devices=args.devices,
        env=parse_env(args.env),
        ncu_dir=args.ncu_dir,
    )


def handle_save(args: argparse.Namespace, console: Console) -> int:
    """Write the named images to a tar archive (or stdout)."""
    namespace = namespace_of(args)
    from fleetbench.images.transfer import save_images

    save_images(args.names, args.output, namespace=namespace, variant=args.variant)
    return 0


def handle_load(args: argparse.Namespace, console: Console) -> int:
    """Load images from an archive (or stdin)."""
    from fleetbench.images.transfer import load_images

    load_images(args.input)
    return 0
