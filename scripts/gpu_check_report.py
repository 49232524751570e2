"""The report of scripts/gpu-check.sh: one Markdown page and the JSON it is made from.

Reads the check's work folder: `stages.tsv` (name, ok/failed/skipped, exit status, seconds), each
stage's commands and output in `logs/`, the runs' result records under `results/<run>-*`, and the
captured summaries (`trace_summary.{md,json}`, `ncu_summary.{txt,json}`). Whatever a failed stage
did not produce is reported as missing, never guessed.

    python scripts/gpu_check_report.py --work DIR --run RUN --md OUT.md --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from fleetbench.errors import UserError
from fleetbench.fsutil import write_text_atomic
from fleetbench.results.store import read_records

GIB = 2**30
TAIL_LINES = 25  # of a failed stage's output, in the report
TRAIN_RUNS = ("eager", "image", "compile", "float8", "trace")


def read_stages(work: Path) -> list[dict[str, Any]]:
    """The stages in the order they ran, each with its commands, and the end of its output when it failed."""
    stages = []
    path = work / "stages.tsv"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for number, line in enumerate(lines, start=1):
        name, status, code, seconds = stage_fields(path, number, line)
        logs = work / "logs"
        commands = (
            (logs / f"{name}.cmd").read_text(encoding="utf-8").splitlines() if (logs / f"{name}.cmd").is_file() else []
        )
        output = (
            (logs / f"{name}.log").read_text(encoding="utf-8", errors="replace")
            if (logs / f"{name}.log").is_file()
            else ""
        )
        skipped = logs / f"{name}.skipped"
        stages.append(
            {
                "name": name,
                "status": status,
                "exit_status": int(code),
                "seconds": int(seconds),
                "commands": [c.removeprefix("+ ") for c in commands],
                "skipped_because": skipped.read_text(encoding="utf-8").strip() if skipped.is_file() else None,
                "output_tail": output.splitlines()[-TAIL_LINES:] if status == "failed" else [],
            }
        )
    return stages


STATUSES = ("ok", "failed", "skipped")


def stage_fields(path: Path, number: int, line: str) -> tuple[str, str, int, int]:
    """One line of stages.tsv: name, status, exit status, seconds; a UserError naming the line otherwise."""
    fields = line.split("\t")
    accepted = "accepted: NAME<tab>ok|failed|skipped<tab>EXIT<tab>SECONDS, as gpu-check.sh writes it"
    shown = repr(line[:60]) + ("..." if len(line) > 60 else "")
    if len(fields) != 4:
        raise UserError(f"{path}:{number}: {shown} has {len(fields)} fields, not 4; {accepted}")
    name, status, code, seconds = fields
    if not name or "/" in name or status not in STATUSES:
        raise UserError(f"{path}:{number}: {shown} has no stage name or an unknown status; {accepted}")
    if not (code.lstrip("-").isdigit() and seconds.isdigit()) or len(code) > 4 or len(seconds) > 9:
        raise UserError(f"{path}:{number}: {shown}: the exit status or seconds is no whole number; {accepted}")
    return name, status, int(code), int(seconds)


def finite(value: Any) -> Any:
    """`value` with every NaN or infinity (a summary that measured nothing) replaced by None: reported as missing."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def run_records(work: Path, run: str) -> list[dict[str, Any]]:
    """Every record the check's runs wrote (rank 0 and the rest), as plain data."""
    found = []
    for folder in sorted((work / "results").glob(f"{run}-*")):
        try:
            records = read_records(folder)
        except UserError:
            continue
        found += [r.model_dump(mode="json") for r in records]
    return found


def train_row(record: dict[str, Any]) -> dict[str, Any]:
    """The figures of one training run that the check reports."""
    s = record.get("summary") or {}
    precision = s.get("precision") if isinstance(s.get("precision"), dict) else {}
    return {
        "run": record["run_id"].rsplit("-", 1)[-1],
        "status": record["status"],
        "error": record.get("error"),
        "device": record["device"],
        "backend": s.get("comm_backend"),
        "preset": s.get("preset"),
        "preset_why": s.get("preset_why"),
        "param_dtype": precision.get("param_dtype"),
        "reduce_dtype": precision.get("reduce_dtype"),
        "precision_why": precision.get("why"),
        "observed_dtypes": precision.get("observed"),
        "compile": (record.get("config") or {}).get("compile"),
        "float8": (record.get("config") or {}).get("float8"),
        "steps": s.get("steps_run"),
        "steady_state_steps": s.get("steady_state_steps"),
        "tokens_per_s": s.get("tokens_per_s"),
        "device_tokens_per_s": s.get("device_tokens_per_s"),
        "tflops_per_device": s.get("tflops_per_device"),
        "mfu": s.get("mfu"),
        "peak_flop_per_second": s.get("peak_flop_per_second"),
        "peak_source": s.get("peak_source"),
        "peak_allocated_bytes": s.get("peak_memory_bytes"),
        "peak_reserved_bytes": s.get("peak_reserved_bytes"),
        "first_loss": s.get("first_loss"),
        "final_loss": s.get("final_loss"),
    }


def read_json(path: Path) -> Any:
    """A captured JSON summary, or None where its stage did not produce one."""
    if not path.is_file():  # missing, or a FIFO a read would wait on forever
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested thousands deep, no summary
        return None


def read_text(path: Path) -> str | None:
    """A captured text output, or None."""
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def gpu_name(records: list[dict[str, Any]], machine_log: str | None) -> str:
    """The GPU's name from a CUDA run's record, else nvidia-smi's first row in the machine stage's output."""
    for record in records:
        if record.get("backend") == "cuda":
            return str(record["device"])
    lines = (machine_log or "").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("name,") and number + 1 < len(lines):
            return lines[number + 1].split(",")[0].strip()
    return "unknown GPU"


def build(work: Path, run: str) -> dict[str, Any]:
    """The report's data: stages, training figures, every record's headline, the captured summaries."""
    records = run_records(work, run)
    machine_log = read_text(work / "logs" / "machine.log")
    train = [
        train_row(r)
        for name in TRAIN_RUNS
        for r in records
        if r["benchmark"] == "train" and r["rank"] == 0 and r["run_id"] == f"{run}-{name}"
    ]
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "run": run,
        "gpu": gpu_name(records, machine_log),
        "git_revision": next((r["git_revision"] for r in records), None),
        "packages": next((r["packages"] for r in records), None),
        "machine": machine_log,
        "stages": read_stages(work),
        "train": train,
        "headlines": [
            {
                "run_id": r["run_id"],
                "benchmark": r["benchmark"],
                "rank": r["rank"],
                "status": r["status"],
                "error": r.get("error"),
                "headline": r.get("headline", []),
            }
            for r in records
            if r["rank"] == 0
        ],
        "trace_summary": read_json(work / "trace_summary.json"),
        "trace_summary_md": read_text(work / "trace_summary.md"),
        "ncu_summary": read_json(work / "ncu_summary.json"),
        "ncu_summary_text": read_text(work / "ncu_summary.txt"),
    }


def fmt(value: Any, kind: str = "") -> str:
    """A figure for the tables: - when missing; percentages, GiB and thousands as asked."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind and (isinstance(value, bool) or not isinstance(value, int | float)):
        return str(value)[:40]  # a figure a damaged record holds as text: shown, never formatted as a number
    if kind == "pct":
        return f"{value:.1%}"
    if kind == "gib":
        return f"{value / GIB:.2f}"
    if kind == "int":
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def stage_lines(data: dict[str, Any]) -> list[str]:
    """The stage table, then each failure's commands and the end of its output."""
    lines = ["## Stages", "", "| stage | status | exit | seconds | commands |", "|---|---|---|---|---|"]
    for s in data["stages"]:
        why = f" ({s['skipped_because']})" if s["skipped_because"] else ""
        commands = "<br>".join(f"`{c}`" for c in s["commands"]) or "-"
        lines.append(f"| {s['name']} | {s['status']}{why} | {s['exit_status']} | {s['seconds']} | {commands} |")
    for s in data["stages"]:
        if s["status"] == "failed":
            lines += ["", f"### {s['name']} failed (exit status {s['exit_status']}): the end of its output", ""]
            lines += ["```", *s["output_tail"], "```"]
    return [*lines, ""]


def train_lines(data: dict[str, Any]) -> list[str]:
    """The training runs: what was chosen and why, and the figures."""
    lines = [
        "## Training (1 GPU, NCCL)",
        "",
        "| run | preset (why) | params / reduce (why) | steps | tokens/s | TFLOP/s | MFU | peak alloc GiB | reserved GiB | loss |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in data["train"]:
        lines.append(
            f"| {t['run']} | {t['preset']} ({t['preset_why']}) | {t['param_dtype']} / {t['reduce_dtype']} "
            f"({t['precision_why']}) | {fmt(t['steps'])} | {fmt(t['tokens_per_s'], 'int')} | "
            f"{fmt(t['tflops_per_device'])} | {fmt(t['mfu'], 'pct')} | {fmt(t['peak_allocated_bytes'], 'gib')} | "
            f"{fmt(t['peak_reserved_bytes'], 'gib')} | {fmt(t['first_loss'])} -> {fmt(t['final_loss'])} |"
        )
    if not data["train"]:
        lines.append("| (no training run wrote a record) | | | | | | | | | |")
    by_run = {t["run"]: t for t in data["train"]}
    bare, boxed = by_run.get("eager", {}).get("tokens_per_s"), by_run.get("image", {}).get("tokens_per_s")
    if bare and boxed:
        lines += [
            "",
            f"In the CUDA trainer image: {boxed / bare:.3f}x the bare run's tokens/s (same run, `--gpus all`).",
        ]
    sources = sorted({t["peak_source"] for t in data["train"] if t["peak_source"]})
    lines += ["", f"MFU against: {', '.join(sources) or '-'}."]
    for t in data["train"]:
        if t["observed_dtypes"]:
            lines.append(f"Seen inside the {t['run']} run's first forward: `{json.dumps(t['observed_dtypes'])}`.")
    return [*lines, ""]


def headline_lines(data: dict[str, Any]) -> list[str]:
    """Every run's headline figures (profile, ncu, roofline, edge and the training runs)."""
    lines = [
        "## Headline figures of every run",
        "",
        "| run | benchmark | status | metric | labels | value |",
        "|---|---|---|---|---|---|",
    ]
    for h in data["headlines"]:
        if not h["headline"]:
            lines.append(f"| {h['run_id']} | {h['benchmark']} | {h['status']} {h['error'] or ''} | - | | |")
        for f in h["headline"]:
            labels = " ".join(f"{k}={v}" for k, v in sorted(f["labels"].items()))
            lines.append(
                f"| {h['run_id']} | {h['benchmark']} | {h['status']} | {f['metric']} | {labels} | {fmt(f['value'])} |"
            )
    return [*lines, ""]


def markdown(data: dict[str, Any]) -> str:
    """The report page."""
    failed = [s["name"] for s in data["stages"] if s["status"] == "failed"]
    verdict = f"failed stages: {', '.join(failed)}" if failed else "every stage passed or was skipped"
    lines = [
        f"# GPU check on {data['gpu']}, {data['generated']}",
        "",
        f"`scripts/gpu-check.sh`, run `{data['run']}`, commit `{data['git_revision']}`: {verdict}.",
        "",
        *stage_lines(data),
        *train_lines(data),
        "## torch.profiler: 3 training steps (`fleetbench trace summarize`)",
        "",
        data["trace_summary_md"] or "(no trace summary: see the trace stage)",
        "",
        "## Nsight Compute: one step's GEMMs (`fleetbench ncu summarize`)",
        "",
        "```",
        (data["ncu_summary_text"] or "(no ncu summary: see the ncu stage)").rstrip(),
        "```",
        "",
        *headline_lines(data),
        "## Machine",
        "",
        "```",
        (data["machine"] or "(no machine stage output)").rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="the check's work folder")
    parser.add_argument("--run", required=True, help="the run id prefix of the check's runs")
    parser.add_argument("--md", type=Path, required=True, help="the Markdown report to write")
    parser.add_argument("--json", type=Path, required=True, help="the JSON to write beside it")
    args = parser.parse_args(argv)
    try:
        if not args.work.is_dir():
            raise UserError(f"--work {args.work} is not a folder; accepted: the work folder of gpu-check.sh")
        data = finite(build(args.work, args.run))
        text = json.dumps(data, indent=2, allow_nan=False, default=str) + "\n"
        page = markdown(data)
        write_text_atomic(args.json, text, "--json")
        write_text_atomic(args.md, page, "--md")
    except UserError as exc:
        print(f"gpu_check_report: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeError) as exc:
        print(f"gpu_check_report: error: cannot read the work folder {args.work} ({exc})", file=sys.stderr)
        return 2
    print(f"report: {args.md} (data: {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
