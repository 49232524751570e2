#!/usr/bin/env bash
# `make setup`: system packages (Debian/Ubuntu, when missing) and the project's virtual environment.
# Idempotent and quick when everything is in place: a dpkg query and a stamp comparison.
set -euo pipefail

VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
EXTRAS=${EXTRAS:-dev,ncu,mobile,llm,compare}
SYSTEM_PACKAGES=(
  docker.io               # Docker engine for the images and the local cluster
  prometheus              # Prometheus server and promtool
  prometheus-pushgateway  # where batch jobs push
  prometheus-node-exporter  # textfile collector for .prom files
  mesa-vulkan-drivers     # lavapipe: software Vulkan for the edge runner
  glslc                   # GLSL -> SPIR-V
  libvulkan-dev           # Vulkan headers: llama.cpp's Vulkan build (the llm extra)
  spirv-headers           # SPIR-V headers (CMake package): llama.cpp's Vulkan build
  spirv-tools             # spirv-val (validates SPIR-V; gemm_coopmat takes the newer one of the mobile extra)
  debootstrap             # the offline base image for cpu containers
  qemu-user-static        # arm64 edge images built and run on x86-64 (binfmt_misc, register_binfmt below)
  chromium                # headless check of the offline report page
)

say() { printf 'setup: %s\n' "$*"; }

install_system_packages() {
  local missing=()
  command -v dpkg-query >/dev/null 2>&1 || { say "not Debian/Ubuntu: install ${SYSTEM_PACKAGES[*]} yourself"; return 0; }
  python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
  for pkg in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
      say "missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
      return 0
    fi
  fi
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  # policy-rc.d keeps the packages' own services (prometheus on :9090 and friends) from starting:
  # the suite starts its own on loopback ports it chooses.
  local policy=/usr/sbin/policy-rc.d created_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod +x "$policy" && created_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -n "$created_policy" ] && $sudo rm -f "$policy"
  say "installed: ${missing[*]}"
}

python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

setup_venv() {
  local python=${PYTHON:-python3}
  python_ok "$python" || { echo "setup: $python is older than 3.11; set PYTHON=/path/to/python3.11" >&2; exit 2; }
  [ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$python" -m venv "$VENV"; }
  local stamp="$VENV/.fleetbench-setup"
  local want have_extras extra
  want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-$TORCH_SPEC
  # The stamp is "<sources>-<torch>" and, on its second line, the extras installed: a venv made with
  # more extras serves a target that asks for fewer (`make demo` asks only for what the demo runs).
  if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$want" ]; then
    have_extras=",$(sed -n 2p "$stamp"),"
    local missing_extra="" wanted=() had=()
    IFS=, read -ra wanted <<< "$EXTRAS"
    IFS=, read -ra had <<< "${have_extras:1:-1}"
    for extra in "${wanted[@]}"; do
      [[ "$have_extras" == *",$extra,"* ]] || missing_extra=1
    done
    [ -z "$missing_extra" ] && return 0
    EXTRAS=$(printf '%s\n' "${wanted[@]}" "${had[@]}" | sed '/^$/d' | sort -u | paste -sd, -)
  fi
  say "installing fleetbench[$EXTRAS] with $TORCH_SPEC into $VENV"
  local wheelhouse
  wheelhouse=$(llama_cpp_wheel)
  if ! install_with_uv "$wheelhouse"; then
    say "uv could not install the packages (above); installing them with pip, which takes minutes"
    install_with_pip "$wheelhouse"
  fi
  printf '%s\n%s\n' "$want" "$EXTRAS" > "$stamp"
  say "ready: $("$VENV/bin/python" -c 'import torch, fleetbench; print("fleetbench", fleetbench.__version__, "torch", torch.__version__)')"
}

# uv resolves and installs the same packages as pip, in parallel: a fresh venv in about a minute
# instead of 3 (most of `make setup` on a fresh clone; its bytecode compilation is most of that minute).
# It does not read pip's configuration, so the settings that choose where packages come from
# (find-links, index URLs, constraints, the CA bundle) are handed over from `pip config list`: a
# machine whose pip takes torch's CPU wheel from a local folder gets the same wheel through uv, not
# PyPI's CUDA build. The pip that `python -m venv` put in the venv stays.
UV_SPEC=${UV_SPEC:-uv==0.13.9}
uv_args_from_pip_config() {
  local line key value item
  "$VENV/bin/python" -m pip config list 2>/dev/null | while IFS= read -r line; do
    key=${line%%=*}; key=${key##*.}
    value=${line#*=}; value=${value#\'}; value=${value%\'}
    case $key in
      find-links|extra-index-url|constraint)
        for item in $value; do printf -- '--%s\n%s\n' "$key" "$item"; done ;;
      index-url) printf -- '--index-url\n%s\n' "$value" ;;
    esac
  done
}

install_with_uv() {
  local wheelhouse=$1 cert uv_args tls=()
  "$VENV/bin/python" -m pip install -q "$UV_SPEC" || return 1
  mapfile -t uv_args < <(uv_args_from_pip_config)
  cert=${PIP_CERT:-$("$VENV/bin/python" -m pip config get global.cert 2>/dev/null || true)}
  [ -n "$cert" ] && [ -z "${SSL_CERT_FILE:-}" ] && tls=(env SSL_CERT_FILE="$cert")
  # pip considers every index for every package; uv's default stops at the first index that has it.
  # torch's exact pin is part of the request, so nothing resolves to a multi-GB CUDA build by accident.
  # --compile-bytecode: as pip does. Where PYTHONDONTWRITEBYTECODE is set, a venv without .pyc files
  # compiles torch's sources again in every process (every CLI call, every rank): the test suite took
  # 29 minutes instead of 18-20.
  "${tls[@]}" "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode \
    --index-strategy unsafe-best-match "${uv_args[@]}" --find-links "$wheelhouse" \
    "$TORCH_SPEC" -e ".[$EXTRAS]" || return 1
  # The same version built with other flags counts as installed: put this build in place.
  if [[ ",$EXTRAS," == *",llm,"* ]]; then
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode --no-deps --reinstall \
      "$wheelhouse"/llama_cpp_python-"${LLAMA_CPP_SPEC#*==}"-*.whl || return 1
  fi
}

install_with_pip() {
  local wheelhouse=$1
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "$TORCH_SPEC"
  "$VENV/bin/python" -m pip install -q --find-links "$wheelhouse" "$TORCH_SPEC" -e ".[$EXTRAS]"
  if [[ ",$EXTRAS," == *",llm,"* ]]; then
    "$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$wheelhouse"/llama_cpp_python-"${LLAMA_CPP_SPEC#*==}"-*.whl
  fi
}

# llama-cpp-python ships only a source distribution: its CMake build of llama.cpp takes 5-20 minutes on
# 2 cores (9 CPU-minutes). Built once into a wheelhouse outside the repository, keyed by the pin and the
# CMake flags, which pip then reads; nothing is rebuilt while they stay (pip's own wheel cache is not
# used: it is keyed by the sdist alone, not by the flags). Not GGML_NATIVE: -march=native
# turns on AMX wherever the CPU advertises it, and on a VM that advertises AMX without enabling it
# (a Sapphire Rapids VM here) every q8_0 matmul died of SIGILL on `tilezero`; llama.cpp's portable set
# (AVX2, FMA, F16C) runs anywhere x86-64-v3 does, and the edge image's wheel is built the same way.
LLAMA_CPP_SPEC=${LLAMA_CPP_SPEC:-llama-cpp-python==0.3.36}
LLAMA_CPP_CMAKE_ARGS=${LLAMA_CPP_CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF}
llama_cpp_wheel() {
  local key wheelhouse
  key=$(printf '%s\n%s\n%s\n' "$LLAMA_CPP_SPEC" "$LLAMA_CPP_CMAKE_ARGS" "$(uname -m)" | sha256sum | cut -c1-12)
  wheelhouse="${FLEETBENCH_WHEELHOUSE:-$HOME/.cache/fleetbench/wheels}/llama-$key"
  mkdir -p "$wheelhouse"
  if [[ ",$EXTRAS," == *",llm,"* ]] && ! ls "$wheelhouse"/llama_cpp_python-"${LLAMA_CPP_SPEC#*==}"-*.whl >/dev/null 2>&1; then
    say "building $LLAMA_CPP_SPEC (llama.cpp, CPU) once into $wheelhouse: about 5-10 minutes on 2 cores (9 CPU-minutes), cached for every later setup" >&2
    CMAKE_ARGS="$LLAMA_CPP_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
      "$VENV/bin/python" -m pip wheel -q --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$wheelhouse" "$LLAMA_CPP_SPEC" >&2
  fi
  echo "$wheelhouse"
}

# The Vulkan build of the same pin, from the same sdist, with the same portable flags plus GGML_VULKAN: its
# shaders (glslc) and ggml-vulkan.cpp make it slow (measured: see docs/edge-llm.md), so it is built once
# into a wheelhouse of its own, keyed as the CPU one. Both are the module llama_cpp, so the Vulkan one
# goes into its own folder, VENV/llama-vulkan, which the Vulkan rows of `fleetbench edge llm` put first
# on their worker's path (fleetbench.edge.llm.backends). The CMake build folder is kept: llama-bench for
# the Vulkan parity row (scripts/perf_edge_llm.py --build) is built in it from the very same objects.
# Vulkan-Headers before 1.3.272 (Debian 12: 1.3.239) lack VK_EXT_layer_settings, which llama.cpp's
# instance creation names: scripts/llama-vulkan-compat adds its three declarations (nothing else; no
# llama.cpp source is changed). Where glslc or the headers are missing the build is left out, said once;
# a failed build leaves the CPU rows as they are.
LLAMA_CPP_VULKAN_CMAKE_ARGS=${LLAMA_CPP_VULKAN_CMAKE_ARGS:-$LLAMA_CPP_CMAKE_ARGS -DGGML_VULKAN=ON}
llama_cpp_vulkan() {
  [[ ",$EXTRAS," == *",llm,"* ]] || return 0
  local headers=${VULKAN_SDK:+$VULKAN_SDK/include}
  headers=${headers:-/usr/include}
  if ! command -v glslc >/dev/null 2>&1 || [ ! -f "$headers/vulkan/vulkan.hpp" ]; then
    say "llama.cpp Vulkan build left out: needs glslc and the Vulkan headers (libvulkan-dev, spirv-headers)"
    return 0
  fi
  local key cache wheelhouse build src version target wheel args compat
  cache=$HOME/.cache/fleetbench
  args=$LLAMA_CPP_VULKAN_CMAKE_ARGS
  if ! grep -q "VK_EXT_layer_settings" "$headers/vulkan/vulkan_core.h"; then
    compat="$cache/src/llama-vulkan-compat-$(sha256sum scripts/llama-vulkan-compat/vulkan/vulkan.hpp | cut -c1-12)"
    mkdir -p "$compat/vulkan" && cp scripts/llama-vulkan-compat/vulkan/vulkan.hpp "$compat/vulkan/"
    args="$args -DCMAKE_CXX_FLAGS=-I$compat"
  fi
  version=${LLAMA_CPP_SPEC#*==}
  key=$(printf '%s\n%s\n%s\n' "$LLAMA_CPP_SPEC" "$args" "$(uname -m)" | sha256sum | cut -c1-12)
  wheelhouse="${FLEETBENCH_WHEELHOUSE:-$cache/wheels}/llama-vulkan-$key"
  build="$cache/build/llama-vulkan-$key"
  if ! ls "$wheelhouse"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
    src="$cache/src"
    mkdir -p "$src" "$wheelhouse" "$cache/build"
    [ -f "$src/llama_cpp_python-$version/CMakeLists.txt" ] || {
      "$VENV/bin/python" -m pip download -q --no-binary :all: --no-deps "$LLAMA_CPP_SPEC" -d "$src"
      tar -xzf "$src/llama_cpp_python-$version.tar.gz" -C "$src"
    }
    say "building $LLAMA_CPP_SPEC with Vulkan once into $wheelhouse (log: $build.log): about 20 minutes on 2 cores, cached for every later setup"
    local TIMEFORMAT='%0R s wall, %0U s user + %0S s system CPU'
    if ! { time CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
      "$VENV/bin/python" -m pip wheel --no-cache-dir --no-deps -C build-dir="$build" -w "$wheelhouse" \
      "$src/llama_cpp_python-$version" >"$build.log" 2>&1; } 2>"$build.time"; then
      say "llama.cpp Vulkan build failed after $(cat "$build.time") (see $build.log); the CPU build is unaffected"
      return 0
    fi
    say "built llama.cpp with Vulkan: $(cat "$build.time")"
  fi
  wheel=$(compgen -G "$wheelhouse/llama_cpp_python-$version-*.whl" | head -n1)
  target="$VENV/llama-vulkan"
  [ "$(cat "$target/.fleetbench-wheel" 2>/dev/null)" = "$wheel" ] && return 0
  rm -rf "$target"
  "$VENV/bin/python" -m pip install -q --no-deps --target "$target" "$wheel"
  echo "$wheel" > "$target/.fleetbench-wheel"
  echo "$build" > "$target/.fleetbench-build"  # for llama-bench (scripts/perf_edge_llm.py)
  say "llama.cpp Vulkan build installed in $target"
}

# The kernel runs aarch64 programs (an arm64 image's build steps and containers) through qemu when
# binfmt_misc has Debian's entry for them; systemd-binfmt registers it at boot, but containers and
# machines without systemd never do. Idempotent; one line where it cannot (the arm64 tests then skip).
register_binfmt() {
  local binfmt=/proc/sys/fs/binfmt_misc conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [ "$(uname -m)" = aarch64 ] && return 0
  [ -e "$binfmt/qemu-aarch64" ] && return 0
  [ -f "$conf" ] || { say "arm64 images left out: $conf is missing (apt-get install qemu-user-static)"; return 0; }
  if [ "$(id -u)" -ne 0 ]; then
    say "arm64 images left out: registering qemu-aarch64 in binfmt_misc needs root (sudo make setup)"; return 0
  fi
  if [ ! -e "$binfmt/register" ] && ! mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null; then
    say "arm64 images left out: binfmt_misc cannot be mounted at $binfmt (a container without it?)"; return 0
  fi
  if ! cat "$conf" >"$binfmt/register" 2>/dev/null; then
    say "arm64 images left out: the kernel refused qemu-aarch64's binfmt_misc entry ($conf)"; return 0
  fi
  say "registered qemu-aarch64 in binfmt_misc: arm64 images build and run here under emulation"
}

install_system_packages
register_binfmt
setup_venv
llama_cpp_vulkan
# The package's bytecode, kept current (an editable install has none): where PYTHONDONTWRITEBYTECODE is
# set, every CLI call and every rank torchrun starts would otherwise compile the sources again.
"$VENV/bin/python" -m compileall -q benchmarks/fleetbench
