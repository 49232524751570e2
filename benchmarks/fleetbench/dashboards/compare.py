"""Compare runs: each benchmark's headline figures of a base and a new run side by side, and new / base.

Two single-choice run variables, `base` and `new`, pick the runs. Every figure is reduced, within
each run, to one value per match key: the metric's own labels from the catalogue (kernel, dtype,
size, op ...; what `fleetbench compare` pairs figures on) and, for per-rank training figures, the
rank. Everything else a run's series carry (`run_id`, `host`, the Pushgateway's `instance` and
`job`, `device`, `backend`) is dropped by `avg by (<key>)`, so the ratio divides on exactly the key
(`/ on(<key>)`): runs on other hosts or devices still pair up, one to one, and a run with several
hosts contributes their mean (narrow it with the Host filter).

The ratios are not verdicts: whether a change is real is `fleetbench compare`'s call (a test on the
samples, corrected across the figures, against the minimum change this machine's noise allows). The
Verdicts row shows the verdicts compare pushed (`--pushgateway`) for the chosen base and new runs,
the same ones its terminal table, pull-request comment and the HTML report show, and the steps
`fleetbench history --pushgateway` found in each metric's series of runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetbench.catalogue import spec
from fleetbench.dashboards.definition import (
    FILTERS,
    Dashboard,
    Panel,
    Query,
    Row,
    Variable,
    selection,
    unit_of,
)

BASE = Variable("base", "Base run", source="run_id", multi=False, order="asc")
NEW = Variable("new", "New run", source="run_id", multi=False, order="desc")
RATIO_UNIT = "suffix:×"
NOT_A_VERDICT = " The ratio is not a verdict: the Verdicts row has fleetbench compare's."
BETTER_TEXT = {
    "higher": "Higher is better.",
    "lower": "Lower is better.",
    None: "Neither direction is better: it describes, it does not rank.",
}


@dataclass(frozen=True)
class Figure:
    """One headline metric as the compare panels show it: its series and what pairs a base and a new one."""

    metric: str
    benchmark: str
    legend: str = ""  # names one value of the key, e.g. "{{kernel}} {{dtype}} {{size}}"
    matchers: tuple[tuple[str, str], ...] = ()  # labels held to one value, e.g. (("percentile", "p50"),)
    per_rank: bool = False  # one value per rank (training), else per run
    top: int = 0  # only the keys among the `top` largest of either run (0: every key)

    @property
    def key(self) -> tuple[str, ...]:
        """The labels that identify one value within a run: the metric's own labels, and the rank if per rank."""
        return spec(self.metric).labels + (("rank",) if self.per_rank else ())

    def value(self, run: Variable) -> str:
        """The figure of one run, one series per key: `avg by (<key>) (metric{run_id="$run", filters})`."""
        series = selection(self.metric, (run, *FILTERS), benchmark=self.benchmark, **dict(self.matchers))
        return f"avg by ({', '.join(self.key)}) ({series})"

    def _on(self) -> str:
        return f"on({', '.join(self.key)})"

    def _kept(self, expr: str) -> str:
        """`expr` limited to the keys among the `top` largest of either run (no limit without `top`)."""
        if not self.top:
            return expr
        leaders = f"topk({self.top}, {self.value(BASE)}) or topk({self.top}, {self.value(NEW)})"
        return f"({expr}) and {self._on()} ({leaders})"

    def side(self, run: Variable) -> str:
        """The query of one run's values."""
        return self._kept(self.value(run))

    def ratio(self) -> str:
        """new / base per key; keys only one of the runs has drop out."""
        return self._kept(f"{self.value(NEW)} / {self._on()} {self.value(BASE)}")


def _legend(prefix: str, figure: Figure) -> str:
    return f"{prefix} {figure.legend}".strip()


def compare_panels(title: str, figures: tuple[Figure, ...], what: str, gpu_only: bool = False) -> tuple[Panel, Panel]:
    """Two panels: the base and the new run's values side by side, and new / base per key."""
    better = spec(figures[0].metric).better
    sides = tuple(
        Query(figure.side(run), legend=_legend(run.name, figure), instant=True)
        for run in (BASE, NEW)
        for figure in figures
    )
    ratios = tuple(Query(figure.ratio(), legend=figure.legend or "new / base", instant=True) for figure in figures)
    values = Panel(
        f"{title}: base and new",
        "bargauge",
        sides,
        unit_of(figures[0].metric),
        f"{what}, the base run's beside the new run's. {BETTER_TEXT[better]}",
        gpu_only=gpu_only,
    )
    change = Panel(
        f"{title}: new / base",
        "bargauge",
        ratios,
        RATIO_UNIT,
        f"{what}: the new run's over the base run's, series paired on {', '.join(figures[0].key) or 'the run'} "
        f"(1 = unchanged). {BETTER_TEXT[better]}{NOT_A_VERDICT}",
        gpu_only=gpu_only,
    )
    return values, change


def _runs_table() -> Panel:
    labels = "run_id, benchmark, host, device, backend, version, git_revision"
    expr = " or ".join(
        f"max by ({labels}) ({selection('fleetbench_run_info', (run, *FILTERS))})" for run in (BASE, NEW)
    )
    return Panel(
        "Runs compared",
        "table",
        (Query(expr, instant=True),),
        "none",
        "The two runs' benchmarks, hosts, devices and software versions (value 1: the run reported)",
        width=24,
        height=6,
    )


VERDICT_LABELS = "compared, metric, figure, verdict"
verdicts = Row(
    "Verdicts (fleetbench compare and history)",
    (
        Panel(
            "Verdicts of fleetbench compare",
            "table",
            (
                Query(
                    f'max by ({VERDICT_LABELS}) (fleetbench_compare_change_ratio{{base="$base",new="$new"}})',
                    instant=True,
                ),
            ),
            unit_of("fleetbench_compare_change_ratio"),
            "Each headline figure's change (new - base) / base and the verdict fleetbench compare gave it for these "
            "two runs (pushed with --pushgateway; for --rounds, each side's last process): the same verdicts as "
            "its table, its pull-request comment and the HTML report. Worse fails the gate.",
            width=24,
            pushed_by_compare=True,
        ),
        Panel(
            "Steps in the runs' history (fleetbench history)",
            "table",
            (Query("max by (compared, metric, figure, at_run, commit) (fleetbench_history_step_ratio)", instant=True),),
            unit_of("fleetbench_history_step_ratio"),
            "Each step (change point) fleetbench history found in a headline metric over the stored runs, the run "
            "and commit where it happened and its change (after - before) / before (pushed with --pushgateway)",
            width=24,
            pushed_by_compare=True,
        ),
    ),
)

PROBE_KEY = "{{probe}} {{dtype}} {{size}}"
RANK = "rank {{rank}}"
KERNEL = "{{kernel}} {{dtype}} {{size}}"

probe = Row(
    "Device probe",
    (
        *compare_panels(
            "Matmul FLOP/s",
            (Figure("fleetbench_probe_achieved_flop_per_second", "probe", PROBE_KEY, (("probe", "matmul"),)),),
            "Achieved FLOP/s of torch.matmul per size and dtype",
        ),
        *compare_panels(
            "Copy bandwidth",
            (Figure("fleetbench_probe_achieved_bytes_per_second", "probe", PROBE_KEY, (("probe", "copy"),)),),
            "Bytes read plus written per second by a tensor copy, per size",
        ),
    ),
)

train = Row(
    "Training",
    (
        *compare_panels(
            "Tokens/s per device",
            (Figure("fleetbench_train_device_tokens_per_second", "train", RANK, per_rank=True),),
            "Training throughput of each device (rank) over the latest log interval",
        ),
        *compare_panels(
            "MFU",
            (Figure("fleetbench_train_mfu_ratio", "train", RANK, per_rank=True),),
            "Model FLOPs utilisation of each device (rank)",
        ),
        *compare_panels(
            "Step time",
            (Figure("fleetbench_step_seconds", "train", RANK, per_rank=True),),
            "Wall-clock time of the latest step on each rank",
        ),
        *compare_panels(
            "Peak memory",
            (
                Figure("fleetbench_memory_peak_allocated_bytes", "train", f"allocated {RANK}", per_rank=True),
                Figure("fleetbench_process_peak_rss_bytes", "train", f"RSS {RANK}", per_rank=True),
            ),
            "Peak memory of each rank: bytes allocated by tensors on a GPU, resident set of the process",
        ),
        *compare_panels(
            "Loss",
            (Figure("fleetbench_train_loss", "train", matchers=(("rank", "0"),)),),
            "Loss at the last logged step (rank 0); compare runs of the same model, data and steps",
        ),
    ),
)

edge = Row(
    "Edge",
    (
        *compare_panels(
            "Kernel latency p50",
            (
                Figure(
                    "fleetbench_edge_kernel_latency_percentile_seconds",
                    "edge",
                    f"{KERNEL} ({{{{timing}}}})",
                    (("percentile", "p50"),),
                ),
            ),
            "Median dispatch latency of each kernel",
        ),
        *compare_panels(
            "Kernel GFLOP/s",
            (Figure("fleetbench_edge_kernel_achieved_flop_per_second", "edge", f"{KERNEL} ({{{{timing}}}})"),),
            "Achieved FLOP/s of each kernel at its median latency",
        ),
        *compare_panels(
            "GEMM share of peak",
            (Figure("fleetbench_edge_gemm_peak_ratio", "edge", KERNEL),),
            "GEMM FLOP/s over the same run's measured f32 FMA peak",
        ),
        *compare_panels(
            "Model latency",
            (Figure("fleetbench_edge_model_latency_trimmed_mean_seconds", "edge", "{{model}} {{runtime}}"),),
            "Trimmed mean forward latency of each model and runtime",
        ),
    ),
)

profile = Row(
    "Profile",
    (
        *compare_panels(
            "Top ops' time",
            (Figure("fleetbench_profile_op_seconds", "profile", "{{op}}", top=10),),
            "Self time of the operators among the ten slowest of either run",
        ),
        *compare_panels(
            "Time shares",
            (Figure("fleetbench_profile_time_share_ratio", "profile", "gpu{{gpu}} {{category}}"),),
            "Share of the device span in compute, communication, memory copies and idle (GPU traces only)",
            gpu_only=True,
        ),
    ),
)

COMPARE = Dashboard(
    uid="fleetbench-compare",
    title="fleetbench / Compare runs",
    description="Two runs' headline figures side by side and new / base: probe, training, edge and profile",
    benchmarks=(),
    rows=(Row("Runs", (_runs_table(),)), verdicts, probe, train, edge, profile),
    variables=(FILTERS[0], BASE, NEW, *FILTERS[1:]),
)
