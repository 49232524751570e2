# fleetbench: every user task is a target; each is a thin call of the `fleetbench` CLI.
# `make help` lists them. Every target depends on `setup`, so each works alone on a fresh machine.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
FB := $(VENV)/bin/fleetbench
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,ncu,mobile,llm,compare
# What `make demo` runs needs only the edge extra (ExecuTorch, the cooperative-matrix toolchain): a fresh
# clone's demo does not wait for llama.cpp's build, which the first target that needs it does once.
DEMO_EXTRAS ?= mobile
RESULTS ?= results
PYTEST_ARGS ?=
# pytest-xdist workers of `make pytest` (0: one process); tests/conftest.py:worker_group says which tests share one
PYTEST_WORKERS ?= 3
export TORCH_SPEC EXTRAS VENV

.PHONY: help setup demo test test-data lint fmt docs docs-serve pytest perf perf-gate compare compare-rounds noise history baseline train train-4gpu probe collectives profile edge edge-llm images images-cpu cluster-up cluster-down deploy report dashboards stack-up stack-down stack-status results flush clean

help: ## list the targets
	@echo "fleetbench: make TARGET [VAR=value]"
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sort | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

setup: ## system packages (Debian/Ubuntu) + .venv with fleetbench; fast when done (TORCH_SPEC=...)
	@bash scripts/setup.sh

demo: ## the main job on the CPU: every benchmark -> local Prometheus, results/<run_id>/
	@EXTRAS=$(DEMO_EXTRAS) bash scripts/setup.sh
	@$(FB) demo --results-dir $(RESULTS)

test: setup ## lint (docs site included), then the whole test suite (starts the services it needs)
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory pytest

lint: setup ## ruff, mypy --strict, hadolint, ansible-lint, shellcheck, and the docs site built --strict
	$(VENV)/bin/ruff check benchmarks tests scripts
	$(VENV)/bin/ruff format --check benchmarks tests scripts
	$(VENV)/bin/mypy
	find containers -name Dockerfile -print0 | sort -z | xargs -0 $(VENV)/bin/hadolint
	cd deploy && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ../$(VENV)/bin/ansible-lint --offline --profile production -q
	$(VENV)/bin/shellcheck .ci/run deploy/slurm/*.sbatch $$(find scripts containers deploy -name '*.sh' | sort)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/docs-lint

docs: setup ## the docs site into site/ (mkdocs, Material; API pages from the docstrings): open site/index.html
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: setup ## the docs site on http://127.0.0.1:8000, rebuilt as you edit
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

fmt: setup ## rewrite benchmarks tests scripts: ruff's safe fixes (imports, upgrades), then ruff format
	$(VENV)/bin/ruff check --fix-only benchmarks tests scripts
	$(VENV)/bin/ruff format benchmarks tests scripts

pytest: setup ## pytest only, PYTEST_WORKERS=3 processes (PYTEST_ARGS="-m 'not slow'" to narrow); starts dockerd for the docker tests
	@bash scripts/dockerd.sh || echo "no Docker engine could start: docker tests will skip"
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS)

TEST_DATA ?= $(FLEETBENCH_TEST_DATA)
test-data: setup ## fetch the third-party test data (real profiler outputs) by commit into TEST_DATA=DIR, checked
	@$(PY) scripts/test_data.py $(TEST_DATA)

perf: setup ## every performance row at quick settings (target: 10 min on 2 cores), each judged PASS/FAIL/NOISY/SKIP
	@$(PY) scripts/perf.py

perf-gate: setup ## the gate's calibration: A/A false positives and power of compare --rounds on real probe runs (1.5-2 h; a quiet machine)
	@$(PY) scripts/perf_compare.py

# Training knobs: the same target runs multi-node with torchrun's c10d rendezvous
#   make train NNODES=2 NODE_RANK=0 RDZV_ENDPOINT=node0:29500   (and NODE_RANK=1 on the other node)
NPROC ?=
NNODES ?=
NODE_RANK ?=
RDZV_ENDPOINT ?=
PRESET ?=  # unset: the device's default (fleetbench/train/defaults.py): tiny on the CPU, seed on CUDA
DTYPE ?=   # bf16, fp32 or auto; unset: the device's default (fp32 on the CPU, bf16 params + fp32 reduce on CUDA)
STEPS ?=
CONFIG ?=
MAX_RESTARTS ?=
TRAIN_ARGS ?=
PROFILE ?=  # 1: torch.profiler traces of steps 3..5 on every rank (A:B: those steps)
train_launch = $(if $(NNODES),--nnodes $(NNODES)) $(if $(NODE_RANK),--node-rank $(NODE_RANK)) \
  $(if $(RDZV_ENDPOINT),--rdzv-endpoint $(RDZV_ENDPOINT)) $(if $(STEPS),--steps $(STEPS)) \
  $(if $(PRESET),--preset $(PRESET)) $(if $(DTYPE),--dtype $(DTYPE)) \
  $(if $(CONFIG),--config $(CONFIG)) $(if $(MAX_RESTARTS),--max-restarts $(MAX_RESTARTS)) \
  $(if $(filter 1,$(PROFILE)),--profile-steps 3:5,$(if $(filter-out 0,$(PROFILE)),--profile-steps $(PROFILE))) $(TRAIN_ARGS)

train: setup ## FSDP2 on the CPU: 2 gloo ranks, the CPU's default preset and dtype (NPROC NNODES NODE_RANK RDZV_ENDPOINT PRESET DTYPE STEPS CONFIG PROFILE TRAIN_ARGS)
	@$(FB) train --results-dir $(RESULTS) --device cpu --nproc $(or $(NPROC),2) $(train_launch)

# nccl-tests' sweep: 2 gloo ranks on the CPU (8 B .. 1 MiB), or one rank per GPU with NCCL (8 B .. 1 GiB)
COLLECTIVES_ARGS ?=
collectives: setup ## all-reduce/all-gather/reduce-scatter/all-to-all by size: algbw, busbw, a chart (NPROC NNODES NODE_RANK RDZV_ENDPOINT COLLECTIVES_ARGS)
	@$(FB) collectives --results-dir $(RESULTS) $(if $(NPROC),--nproc $(NPROC)) $(if $(NNODES),--nnodes $(NNODES)) \
	  $(if $(NODE_RANK),--node-rank $(NODE_RANK)) $(if $(RDZV_ENDPOINT),--rdzv-endpoint $(RDZV_ENDPOINT)) $(COLLECTIVES_ARGS)

train-4gpu: setup ## FSDP2 on 4 GPUs (NCCL), the CUDA default preset and dtype (seed, bf16 params, fp32 reduce); same knobs
	@$(FB) train --results-dir $(RESULTS) --device cuda --nproc $(or $(NPROC),4) $(train_launch)

probe: setup ## time matmul and copy on this device (achieved FLOP/s and bytes/s)
	@$(FB) probe --results-dir $(RESULTS)

PROFILE_RUN := $(shell date -u +%Y%m%d-%H%M%S)-profile
PROFILE_ARGS ?=
NCU_ARGS ?= --set profile.train_layers=1 --set profile.active=1
profile: setup ## torch.profiler trace, trace summary, roofline (CPU ok); NCU=1 adds Nsight Compute (GPU, EXTRAS=dev,ncu)
	@$(FB) profile --results-dir $(RESULTS) --run-id $(PROFILE_RUN) $(PROFILE_ARGS)
	@if [ "$(NCU)" = "1" ]; then $(FB) ncu run --results-dir $(RESULTS) --run-id $(PROFILE_RUN) $(PROFILE_ARGS) $(NCU_ARGS); fi

edge: setup ## edge GPU kernels (Vulkan/Metal via wgpu; lavapipe here), MPS, ExecuTorch; then edge-llm's three LLM runtimes side by side
	@$(FB) edge run --results-dir $(RESULTS)
	@$(FB) edge llm --results-dir $(RESULTS) $(LLM_ARGS)

LLM_ARGS ?=
edge-llm: setup ## the llama model in llama.cpp (CPU and Vulkan builds), MLX and ExecuTorch side by side: pp/tg tok/s, TTFT, load mmap/read-in, RSS, agreement (LLM_ARGS)
	@$(FB) edge llm --results-dir $(RESULTS) $(LLM_ARGS)

# The cuda variant: trainer and profiler build offline (torch's CUDA wheels on the local base); the
# others build on pinned upstream bases, so list them where a registry is reachable:
#   make images IMAGES="trainer profiler edge-vulkan prometheus pushgateway node-exporter grafana"
IMAGES ?= trainer profiler
images: setup ## CUDA trainer + profiler (torch's CUDA wheels on the offline base; no registry needed)
	@bash scripts/dockerd.sh
	@$(FB) images build $(IMAGES)

images-cpu: setup ## cpu variants (trainer, edge-vulkan) on the offline local base
	@bash scripts/dockerd.sh
	@$(FB) images build --variant cpu

NODES ?= 3
SLURM ?=  # 1: node1 runs slurmctld, the others slurmd (monitoring and slurm deployed); then `fleetbench slurm submit`
cluster-up: setup ## local cluster of NODES (3) SSH nodes on 127.0.0.1 (containers) + its inventory; SLURM=1 with Slurm
	@bash scripts/dockerd.sh
	@$(FB) images build --variant cpu trainer edge-vulkan prometheus pushgateway node-exporter node
	@$(FB) cluster up --nodes $(NODES) $(if $(filter 1,$(SLURM)),--slurm)
	@if [ "$(SLURM)" = "1" ]; then $(FB) deploy monitoring --inventory .fleetbench/cluster/inventory --results-dir $(RESULTS) \
	  && $(FB) deploy slurm --inventory .fleetbench/cluster/inventory --results-dir $(RESULTS) && $(FB) slurm info; fi

cluster-down: setup ## remove the local cluster's nodes
	@$(FB) cluster down

PLAYBOOK ?= site
INVENTORY ?= .fleetbench/cluster/inventory
deploy: setup ## ansible-runner: PLAYBOOK (site) to INVENTORY (the local cluster's); CHECK=1 for a dry run
	@$(FB) deploy $(PLAYBOOK) --inventory $(INVENTORY) --results-dir $(RESULTS) $(if $(filter 1,$(CHECK)),--check,)

report: setup ## offline report of the newest run (RUN=<run_id> for another): HTML + PNG panels
	@$(FB) report $(RUN) --results-dir $(RESULTS)

dashboards: setup ## regenerate grafana/dashboards/*.json from the dashboard model
	@$(FB) dashboards --out grafana/dashboards

stack-up: setup ## start the local Prometheus (:19090) and Pushgateway (:19091) on 127.0.0.1
	@$(FB) stack up

stack-down: setup ## stop them
	@$(FB) stack down

stack-status: setup ## say whether they run
	@$(FB) stack status

BASE ?=
NEW ?=
COMPARE_ARGS ?=
compare: setup ## compare runs: make compare BASE=<run|baseline> NEW=<run> [COMPARE_ARGS="--fail-on-regression 5"]
	@if [ -z "$(BASE)" ] || [ -z "$(NEW)" ]; then echo "make compare: set BASE=<run id, run folder or baseline> and NEW=<run id or folder>" >&2; exit 2; fi
	@$(FB) compare $(BASE) $(NEW) --results-dir $(RESULTS) $(COMPARE_ARGS)

ROUNDS ?=  # unset: compare.rounds (20)
BENCH ?= probe --set probe.threads=1
BASE_REV ?=
NEW_REV ?=
compare-rounds: setup ## base and new in ROUNDS processes each, interleaved: BASE_REV=main NEW_REV=HEAD (git worktree) or COMPARE_ARGS="--new-set k=v"; BENCH="probe ..."
	@$(FB) compare --rounds $(ROUNDS) --results-dir $(RESULTS) $(if $(BASE_REV),--base-rev $(BASE_REV)) $(if $(NEW_REV),--new-rev $(NEW_REV)) $(COMPARE_ARGS) -- $(BENCH)

noise: setup ## this machine's run-to-run noise for compare's minimum change: 2 x ROUNDS processes of BENCH [NAME=baseline]
	@$(FB) noise $(if $(ROUNDS),--rounds $(ROUNDS)) --results-dir $(RESULTS) $(if $(NAME),--baseline $(NAME)) -- $(BENCH)

METRIC ?= probe_achieved_flop_per_second
history: setup ## METRIC over the stored runs and baselines, steps named by run and commit, a PNG
	@$(FB) history $(METRIC) --results-dir $(RESULTS)

NAME ?=
RUN ?=
baseline: setup ## keep a run as a named baseline: make baseline NAME=main RUN=<run id>
	@if [ -z "$(NAME)" ] || [ -z "$(RUN)" ]; then echo "make baseline: set NAME=<name> and RUN=<run id or folder>" >&2; exit 2; fi
	@$(FB) baseline --results-dir $(RESULTS) set $(NAME) $(RUN)

results: setup ## list runs in results/
	@$(FB) results --results-dir $(RESULTS) list

flush: setup ## push metrics spooled while the Pushgateway was unreachable
	@$(FB) metrics flush --results-dir $(RESULTS)

clean: ## remove caches (keeps results/ and .venv)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build benchmarks/*.egg-info
