"""What a person sees of a job's progress: nothing stray in a log or pipe, bars and live tables on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from fleetbench.progress import ConsoleProgress


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=100), out


def test_tasks_draw_nothing_in_a_log_or_a_pipe() -> None:
    plain, out = console(terminal=False)
    progress = ConsoleProgress(plain)
    with progress.task("probe", total=3) as task:
        task.update("matmul 256")
        task.advance()
    with progress.task("peaks", "of cpu") as spinner:
        spinner.update("measuring", completed=1, total=2)
    assert out.getvalue() == ""


def test_on_a_terminal_a_task_draws_its_job_and_description() -> None:
    terminal, out = console(terminal=True)
    with ConsoleProgress(terminal).task("probe", total=2) as task:
        task.update("matmul 256")
        task.advance()
    assert "probe" in out.getvalue() and "matmul 256" in out.getvalue()


def test_a_table_task_prints_one_line_per_row_where_no_live_table_is_drawn() -> None:
    plain, out = console(terminal=False)
    with ConsoleProgress(plain).table("train", "train tiny", ("step", "loss"), total=4) as steps:
        steps.advance()
        steps.row(("1", "2.50"), "Step 1/4 | Loss 2.5000")
        steps.advance()
        steps.row(("2", "2.40"), "Step 2/4 | Loss 2.4000")
    assert out.getvalue().splitlines() == ["Step 1/4 | Loss 2.5000", "Step 2/4 | Loss 2.4000"]


def test_on_a_terminal_the_rows_fill_a_live_table() -> None:
    terminal, out = console(terminal=True)
    with ConsoleProgress(terminal).table("train", "train tiny", ("step", "loss"), total=2) as steps:
        steps.row(("1", "2.50"), "Step 1/2 | Loss 2.5000")
    text = out.getvalue()
    assert "train tiny" in text and "2.50" in text and "Step 1/2" not in text
