"""Bad input, round 5: a hostile pass over the commands of round 4 by hand, each finding kept as a case.

What it found, by class: output paths that are a FIFO or a symbolic link (`compare --out`, `history
--png`) replaced without --force; an empty `--base-rev`/`--new-rev` read as "no rev"; `report` on a run
whose records.jsonl is empty (exit 70) or given an empty run id; baselines and noise calibrations nested
thousands deep (exit 70) or holding fields no calibration has (labels that are a list: exit 70; a
negative median, a best-sample noise that is NaN, a figure of 0 processes: accepted); `images build`
with an empty `--base-python` or `--namespace` (a build started with the default) or an apt package
that is no package name; `slurm submit` with an inventory that is a FIFO (exit 70 after 120 s), a
`--time` Slurm cannot hold (minutes of 61, 10^11 minutes) or a 5,000-character partition; `edge llm`
lists with an empty or repeated item (`--runtimes llama.cpp,,` started a run); `history --repo` naming
a folder that is missing, a file or no git checkout (a warning, exit 0).

Each case runs in-process through tests/badinput.py:check: one `fleetbench: error:` line, exit 2, no
traceback, nothing written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from badinput import BadInput, check, record_line

FLOPS = "probe_achieved_flop_per_second"
MACHINE = {"cpu_model": "Hostile CPU", "cpu_count": "4"}


def run_line(run_id: str) -> str:
    """One successful record with a headline figure, of a machine with a fingerprint (so a calibration of
    its class is looked up)."""
    body = json.loads(record_line(run_id))
    body["machine"] = MACHINE
    body["headline"] = [
        {"metric": f"fleetbench_{FLOPS}", "labels": {"probe": "matmul"}, "value": 1e9, "samples": [1e9, 1.01e9]}
    ]
    return json.dumps(body) + "\n"


RUNS = {"results/a/records.jsonl": run_line("a"), "results/b/records.jsonl": run_line("b")}


def _fifo(name: str) -> Callable[[Path], None]:
    def prepare(tmp: Path) -> None:
        os.mkfifo(tmp / name)

    prepare.__name__ = f"fifo({name})"
    return prepare


def _link(name: str, target: str) -> Callable[[Path], None]:
    """`name` a symbolic link to `target` (itself: a loop; a missing name: a link that leads nowhere)."""

    def prepare(tmp: Path) -> None:
        (tmp / name).symlink_to(tmp / target)

    prepare.__name__ = f"link({name} -> {target})"
    return prepare


def compare_out(out: str, *extra: str) -> tuple[str, ...]:
    return ("compare", "--results-dir", "{tmp}/results", "a", "b", "--out", out, *extra)


def history_png(png: str) -> tuple[str, ...]:
    return ("history", FLOPS, "--results-dir", "{tmp}/results", "--png", png)


OUTPUTS = [
    BadInput("compare-out-fifo", compare_out("o.md"), "--out o.md: a FIFO, socket or device is there", prepare=_fifo("o.md")),
    BadInput("compare-out-fifo-json", compare_out("o.json", "--format", "json"), "a FIFO, socket or device is there",
             prepare=_fifo("o.json")),
    BadInput("compare-out-loop", compare_out("o.md"), "--out o.md: a symbolic link is there", prepare=_link("o.md", "o.md")),
    BadInput("compare-out-link-to-user-file", compare_out("o.md"), "a symbolic link is there, not a file this command wrote",
             files={"mine.md": "# mine\n"}, prepare=_link("o.md", "mine.md")),
    BadInput("compare-out-link-nowhere", compare_out("o.md"), "--out o.md: a symbolic link is there",
             prepare=_link("o.md", "gone.md")),
    BadInput("history-png-fifo", history_png("h.png"), "--png h.png: a FIFO, socket or device is there", files=RUNS,
             prepare=_fifo("h.png")),
    BadInput("history-png-loop", history_png("h.png"), "--png h.png: a symbolic link is there", files=RUNS,
             prepare=_link("h.png", "h.png")),
    BadInput("history-png-link-to-user-csv", history_png("h.png"), "a symbolic link is there",
             files={**RUNS, "mine.csv": "a,b\n"}, prepare=_link("h.png", "mine.csv")),
    BadInput("history-png-link-nowhere", history_png("h.png"), "a symbolic link is there", files=RUNS,
             prepare=_link("h.png", "gone.png")),
]  # fmt: skip


def rounds(*args: str) -> tuple[str, ...]:
    return ("compare", "--results-dir", "{tmp}/results", "--rounds", "3", *args, "--", "probe")


REVS = [
    BadInput("compare-base-rev-empty", rounds("--base-rev", ""), "--base-rev '' is empty; accepted: a branch, tag or commit"),
    BadInput("compare-new-rev-empty", rounds("--new-rev", ""), "--new-rev '' is empty"),
    BadInput("compare-base-rev-blank", rounds("--base-rev", " "), "--base-rev ' ' is empty"),
    BadInput("compare-both-revs-empty", rounds("--base-rev", "", "--new-rev", ""), "--base-rev '' is empty"),
    BadInput("compare-base-rev-empty-no-rounds", ("compare", "--results-dir", "{tmp}/results", "a", "b", "--base-rev", ""),
             "--base-rev '' is empty"),
]  # fmt: skip


def report(*args: str) -> tuple[str, ...]:
    return ("report", "--offline", "--results-dir", "{tmp}/results", *args)


REPORTS = [
    BadInput("report-run-id-empty", report(""), "run id '' is not accepted", files=RUNS),
    BadInput("report-run-no-records", report("e"), "holds no result records; accepted: a run with at least one record",
             files={"results/e/records.jsonl": ""}),
    BadInput("report-run-blank-lines", report("e"), "holds no result records", files={"results/e/records.jsonl": "\n\n\n"}),
    BadInput("report-newest-run-no-records", report(), "holds no result records", files={"results/e/records.jsonl": ""}),
]  # fmt: skip

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
DEEP = [
    BadInput("baseline-nested-deep-compare", ("compare", "--results-dir", "{tmp}/results", "--baseline", "main", "a"),
             "not a baseline file: it is damaged (nested too deeply)", files={**RUNS, "results/baselines/main.json": DEEP_ARRAY}),
    BadInput("baseline-nested-deep-object", ("compare", "--results-dir", "{tmp}/results", "--baseline", "main", "a"),
             "(nested too deeply)", files={**RUNS, "results/baselines/main.json": DEEP_OBJECT}),
    BadInput("baseline-nested-deep-report", report("a", "--compare", "main"), "(nested too deeply)",
             files={**RUNS, "results/baselines/main.json": DEEP_ARRAY}),
]  # fmt: skip


def _calibration(**changes: object) -> str:
    """A noise calibration of MACHINE's class for the runs' figure, with `changes` (top level, or the figure's
    with a `figure_` prefix)."""
    figure = {"benchmark": "probe", "metric": f"fleetbench_{FLOPS}", "labels": {"probe": "matmul"}, "noise_pct": 2.0,
              "processes": 10, "median": 1e9, "best_noise_pct": 1.5}  # fmt: skip
    data: dict[str, object] = {"machine": MACHINE, "set_at": "2026-12-01T00:00:00+00:00", "command": ["probe"],
                               "processes": 20, "figures": [figure]}  # fmt: skip
    for key, value in changes.items():
        if key.startswith("figure_"):
            figure[key.removeprefix("figure_")] = value
        else:
            data[key] = value
    return json.dumps(data)


def _calibration_file() -> str:
    from fleetbench.compare.noise import CALIBRATION_FOLDER, class_key

    return f"results/{CALIBRATION_FOLDER}/noise-{class_key(MACHINE)}.json"


def calibrated(case_id: str, text: str, fragment: str = "not a noise calibration (") -> BadInput:
    return BadInput(case_id, ("compare", "--results-dir", "{tmp}/results", "a", "b"), fragment,
                    files={**RUNS, _calibration_file(): text})  # fmt: skip


CALIBRATIONS = [
    calibrated("calibration-nested-deep", DEEP_ARRAY, "not a noise calibration (nested too deeply)"),
    calibrated("calibration-top-list", "[]", "not a noise calibration (not an object with a list of figures)"),
    calibrated("calibration-figures-object", _calibration(figures={"a": 1})),
    calibrated("calibration-labels-list", _calibration(figure_labels=[1, 2]), "labels '[1, 2]'"),
    calibrated("calibration-labels-numbers", _calibration(figure_labels={"size": 256}), "accepted: an object of texts"),
    calibrated("calibration-figure-processes-0", _calibration(figure_processes=0), "processes 0 of"),
    calibrated("calibration-figure-processes-text", _calibration(figure_processes="10"), "processes '10' of"),
    calibrated("calibration-median-negative", _calibration(figure_median=-1), "median -1 of"),
    calibrated("calibration-median-nan", _calibration(figure_median=float("nan")), "median nan of"),
    calibrated("calibration-median-text", _calibration(figure_median="1e9"), "median '1e9' of"),
    calibrated("calibration-best-noise-nan", _calibration(figure_best_noise_pct=float("nan")), "best_noise_pct nan of"),
    calibrated("calibration-best-noise-huge", _calibration(figure_best_noise_pct=1e300), "best_noise_pct 1e+300 of"),
    calibrated("calibration-best-noise-text", _calibration(figure_best_noise_pct="1"), "best_noise_pct '1' of"),
    calibrated("calibration-machine-list", _calibration(machine=["x"]), "machine \"['x']\""),
    calibrated("calibration-machine-numbers", _calibration(machine={"cpu_count": 4}), "accepted: an object of texts"),
]


def build(*args: str) -> tuple[str, ...]:
    return ("images", "build", "--variant", "cpu", *args)


NO_DOCKER = {"DOCKER_HOST": "unix://{tmp}/no-docker.sock"}  # a case that got past its check reaches no engine
IMAGES = [
    BadInput(case_id, build(*args), fragment, env=NO_DOCKER)
    for case_id, args, fragment in (
        ("images-base-python-empty", ("--base-python", ""), "--base-python '' is not accepted"),
        ("images-namespace-empty", ("--namespace", ""), "--namespace '' is empty"),
        ("images-namespace-long", ("--namespace", "n" * 300), "is 300 characters long; accepted: at most 241"),
        ("images-namespace-long-path", ("--namespace", "/".join(["abc"] * 80)), "characters long; accepted: at most"),
        (
            "images-nsight-space",
            ("--nsight-compute", "a b"),
            "--nsight-compute 'a b' is not accepted; accepted: an apt package",
        ),
        ("images-nsight-shell", ("--nsight-compute", "x;rm -rf /"), "--nsight-compute 'x;rm -rf /' is not accepted"),
        ("images-nsight-subshell", ("--nsight-compute", "$(id)"), "--nsight-compute '$(id)' is not accepted"),
        ("images-nsight-upper", ("--nsight-compute", "Cuda-Nsight"), "is not accepted; accepted: an apt package"),
        ("images-nsight-newline", ("--nsight-compute", "a\nb"), "--nsight-compute 'a\\nb' is not accepted"),
        ("images-nsight-long", ("--nsight-compute", "n" * 300), "is not accepted; accepted: an apt package"),
        (
            "images-nsight-bad-version",
            ("--nsight-compute", "cuda-nsight=1 2"),
            "is not accepted; accepted: an apt package",
        ),
    )
]


def submit(*args: str) -> tuple[str, ...]:
    return ("slurm", "submit", "--local", "--results-dir", "{tmp}/results", *args)


SLURM = [
    BadInput("slurm-inventory-fifo", ("slurm", "submit", "--results-dir", "{tmp}/results", "--inventory", "inv"),
             "inventory inv is not a regular file or folder (a FIFO, socket or device)", prepare=_fifo("inv")),
    BadInput("slurm-inventory-link-nowhere", ("slurm", "submit", "--results-dir", "{tmp}/results", "--inventory", "inv"),
             "does not exist (a symbolic link that leads nowhere)", prepare=_link("inv", "gone")),
    BadInput("slurm-time-seconds-61", submit("--time", "10:61"), "--time '10:61' is not accepted"),
    BadInput("slurm-time-hms-61", submit("--time", "25:61:61"), "--time '25:61:61' is not accepted"),
    BadInput("slurm-time-days-minutes-60", submit("--time", "1-10:60"), "--time '1-10:60' is not accepted"),
    BadInput("slurm-time-huge-minutes", submit("--time", "99999999999"), "below 4294967295 minutes in all"),
    BadInput("slurm-time-huge-days", submit("--time", "99999999-00"), "--time '99999999-00' is not accepted"),
    BadInput("slurm-time-5000-digits", submit("--time", "9" * 5000), "--time '9999"),
    BadInput("slurm-partition-5000", submit("--partition", "p" * 5000), "(5000 bytes) is not accepted; accepted: a partition name"),
    BadInput("slurm-partition-256", submit("--partition", "p" * 256), "accepted: a partition name (1-255 letters"),
]  # fmt: skip


def llm(*args: str) -> tuple[str, ...]:
    return ("edge", "llm", "--results-dir", "{tmp}/results", *args)


LISTS = [
    BadInput("llm-runtimes-trailing-comma", llm("--runtimes", "llama.cpp,", "--dtypes", "f32"),
             "--runtimes 'llama.cpp,' has an empty item; accepted: a comma-separated list"),
    BadInput("llm-runtimes-double-comma", llm("--runtimes", "llama.cpp,,mlx", "--dtypes", "f32"), "has an empty item"),
    BadInput("llm-runtimes-leading-comma", llm("--runtimes", ",llama.cpp", "--dtypes", "f32"), "has an empty item"),
    BadInput("llm-runtimes-blank-item", llm("--runtimes", "llama.cpp, ,mlx", "--dtypes", "f32"), "has an empty item"),
    BadInput("llm-runtimes-twice", llm("--runtimes", "llama.cpp,llama.cpp", "--dtypes", "f32"),
             "--runtimes: edge.llm.runtimes: Value error, values must be unique"),
    BadInput("llm-dtypes-empty-item", llm("--runtimes", "llama.cpp", "--dtypes", "f32,,f16"), "--dtypes 'f32,,f16' has an empty item"),
    BadInput("llm-dtypes-twice", llm("--runtimes", "llama.cpp", "--dtypes", "f32,f32"), "edge.llm.dtypes: Value error, values must be unique"),
    BadInput("llm-backend-empty-item", llm("--runtimes", "llama.cpp", "--dtypes", "f32", "--backend", "cpu,"),
             "--backend 'cpu,' has an empty item"),
    BadInput("export-partitioners-empty-item", ("edge", "export", "--results-dir", "{tmp}/results", "--partitioners", "xnnpack,"),
             "--partitioners 'xnnpack,' has an empty item"),
]  # fmt: skip


def history_repo(repo: str) -> tuple[str, ...]:
    return ("history", FLOPS, "--results-dir", "{tmp}/results", "--repo", repo)


REPOS = [
    BadInput("history-repo-missing", history_repo("nope"), "--repo nope does not exist; accepted: a git checkout", files=RUNS),
    BadInput("history-repo-file", history_repo("f"), "--repo f is not a folder", files={**RUNS, "f": "x"}),
    BadInput("history-repo-loop", history_repo("loop"), "--repo loop is not a folder", files=RUNS, prepare=_link("loop", "loop")),
    BadInput("history-repo-fifo", history_repo("p"), "--repo p is not a folder", files=RUNS, prepare=_fifo("p")),
    BadInput("history-repo-not-git", history_repo("plain"), "--repo plain is no git checkout", files={**RUNS, "plain/x": "x"}),
]  # fmt: skip


CASES = [*OUTPUTS, *REVS, *REPORTS, *DEEP, *CALIBRATIONS, *IMAGES, *SLURM, *LISTS, *REPOS]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_round_five_bad_input_gets_one_clear_line(case: BadInput, tmp_path: Path) -> None:
    check(case, tmp_path / "work", tmp_path / "home")
