"""Every FLEETBENCH_* environment variable the suite reads, with what it does.

This is the registry: code that reads one takes its name from here, and the CLI warns at start about
any other FLEETBENCH_* variable (a misspelt FLEETBENCH_PUSHGATEWAY_URL would otherwise be ignored
without a word). The warning is a log line, not an error, so an unrelated variable never stops a
run; bad values of known variables are errors where they are read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

__all__ = [
    "COMMAND_ENV",
    "DEBIAN_MIRROR_ENV",
    "DEBIAN_SECURITY_MIRROR_ENV",
    "DEBUG_ENV",
    "DEPLOY_DIR_ENV",
    "GIT_REVISION_ENV",
    "GLSLC_ENV",
    "GRAFANA_ADMIN_PASSWORD_ENV",
    "HOST_ENV",
    "IMAGE_NAMESPACE_ENV",
    "KERNELS_DIR_ENV",
    "KNOWN",
    "LLAMA_VULKAN_ENV",
    "LOG_LEVEL_ENV",
    "PERF_QUICK_ENV",
    "PERF_SUMMARY_ENV",
    "PREFIX",
    "PROMETHEUS_PORT_ENV",
    "PROMETHEUS_URL_ENV",
    "PUSHGATEWAY_ENV",
    "PUSHGATEWAY_PORT_ENV",
    "STATE_DIR_ENV",
    "TEST_DATA_ENV",
    "TEST_DATA_URL_ENV",
    "TORCH_FLAVOR_ENV",
    "TRAIN_ERROR_DIR_ENV",
    "WHEELHOUSE_ENV",
    "unknown_variables",
    "warn_unknown_variables",
]

PREFIX = "FLEETBENCH_"

PUSHGATEWAY_ENV = "FLEETBENCH_PUSHGATEWAY"
PROMETHEUS_URL_ENV = "FLEETBENCH_PROMETHEUS_URL"
PROMETHEUS_PORT_ENV = "FLEETBENCH_PROMETHEUS_PORT"
PUSHGATEWAY_PORT_ENV = "FLEETBENCH_PUSHGATEWAY_PORT"
STATE_DIR_ENV = "FLEETBENCH_STATE_DIR"
HOST_ENV = "FLEETBENCH_HOST"
LOG_LEVEL_ENV = "FLEETBENCH_LOG_LEVEL"
DEBUG_ENV = "FLEETBENCH_DEBUG"
DEPLOY_DIR_ENV = "FLEETBENCH_DEPLOY_DIR"
KERNELS_DIR_ENV = "FLEETBENCH_KERNELS_DIR"
GLSLC_ENV = "FLEETBENCH_GLSLC"
TRAIN_ERROR_DIR_ENV = "FLEETBENCH_TRAIN_ERROR_DIR"
IMAGE_NAMESPACE_ENV = "FLEETBENCH_IMAGE_NAMESPACE"
DEBIAN_MIRROR_ENV = "FLEETBENCH_DEBIAN_MIRROR"
DEBIAN_SECURITY_MIRROR_ENV = "FLEETBENCH_DEBIAN_SECURITY_MIRROR"
GIT_REVISION_ENV = "FLEETBENCH_GIT_REVISION"
TORCH_FLAVOR_ENV = "FLEETBENCH_TORCH_FLAVOR"
GRAFANA_ADMIN_PASSWORD_ENV = "FLEETBENCH_GRAFANA_ADMIN_PASSWORD"
COMMAND_ENV = "FLEETBENCH_COMMAND"
TEST_DATA_ENV = "FLEETBENCH_TEST_DATA"
TEST_DATA_URL_ENV = "FLEETBENCH_TEST_DATA_URL"
WHEELHOUSE_ENV = "FLEETBENCH_WHEELHOUSE"
PERF_QUICK_ENV = "FLEETBENCH_PERF_QUICK"
PERF_SUMMARY_ENV = "FLEETBENCH_PERF_SUMMARY"
LLAMA_VULKAN_ENV = "FLEETBENCH_LLAMA_VULKAN"

# name -> what it does (one line each); tests/test_cli_safety_net.py checks that every FLEETBENCH_*
# name in the code, scripts, Makefile, containers and deploy is here.
KNOWN: dict[str, str] = {
    PUSHGATEWAY_ENV: "Pushgateway URL when --pushgateway is not given (wins over the config); empty: no push",
    PROMETHEUS_URL_ENV: "Prometheus URL `fleetbench report` queries without --prometheus; Grafana's datasource",
    PROMETHEUS_PORT_ENV: "port of the local stack's Prometheus (default 19090)",
    PUSHGATEWAY_PORT_ENV: "port of the local stack's Pushgateway (default 19091)",
    STATE_DIR_ENV: "folder of the local stack's and dockerd's state and logs (default .fleetbench)",
    HOST_ENV: "the host label of records and metrics (default: this machine's name)",
    LOG_LEVEL_ENV: "diagnostics level without --log-level: debug, info, warning or error",
    DEBUG_ENV: "1: print the traceback of an unexpected error instead of saving it to a file (as --debug)",
    DEPLOY_DIR_ENV: "the deploy/ folder (Ansible) of an installed copy",
    KERNELS_DIR_ENV: "the edge kernels' sources (mobile/kernels) of an installed copy or an image",
    GLSLC_ENV: "the glslc compiler to use instead of the one on PATH",
    TRAIN_ERROR_DIR_ENV: "set by the train launcher for its ranks: where each rank writes its error",
    IMAGE_NAMESPACE_ENV: "image repository prefix without --namespace",
    DEBIAN_MIRROR_ENV: "Debian mirror of the images' base (default deb.debian.org)",
    DEBIAN_SECURITY_MIRROR_ENV: "Debian security mirror of the images' base",
    GIT_REVISION_ENV: "the commit an image was built from (the records' git_revision)",
    TORCH_FLAVOR_ENV: "set in the trainer and profiler images: cuda or cpu, the torch build they carry",
    GRAFANA_ADMIN_PASSWORD_ENV: "Grafana's admin password for `fleetbench deploy` (the monitoring role)",
    COMMAND_ENV: "the fleetbench command a Slurm job runs on each node (deploy/slurm; default: fleetbench)",
    TEST_DATA_ENV: "the test suite's folder of third-party data (tests/README.md); fleetbench itself ignores it",
    TEST_DATA_URL_ENV: "where scripts/test_data.py fetches that data from (default raw.githubusercontent.com)",
    WHEELHOUSE_ENV: "where `make setup` keeps the llama-cpp-python wheel it builds once per CPU (default ~/.cache/fleetbench/wheels)",
    PERF_QUICK_ENV: "set by `make perf` for the scripts/perf_*.py rows: 1 runs each at its quick settings",
    PERF_SUMMARY_ENV: "set by `make perf`: the file each scripts/perf_*.py row appends its judged row to",
    LLAMA_VULKAN_ENV: "the folder of llama-cpp-python's Vulkan build for `edge llm --backend vulkan` (default .venv/llama-vulkan)",
}

log = logging.getLogger(__name__)


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The FLEETBENCH_* names in `environ` (any case) that fleetbench does not read, sorted."""
    return sorted(name for name in environ if name.upper().startswith(PREFIX) and name not in KNOWN)


def warn_unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Log one warning per unknown FLEETBENCH_* variable, with the closest known name; return those names."""
    names = unknown_variables(environ)
    if names:
        import difflib

        known = ", ".join(sorted(KNOWN))
        suffixes = {name.removeprefix(PREFIX): name for name in KNOWN}  # the shared prefix would match anything
        for name in names:
            close = difflib.get_close_matches(name.upper().removeprefix(PREFIX), suffixes, n=1, cutoff=0.6)
            hint = f"did you mean {suffixes[close[0]]}? " if close else ""
            log.warning("%s is not a fleetbench variable and is ignored; %sknown: %s", name, hint, known)
    return names
