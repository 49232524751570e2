"""NVIDIA's guided analysis: the rule results Nsight Compute attaches to each profiled kernel.

A `.ncu-rep` carries them (`action.rule_results_as_dicts()` in `ncu_report`); ncu's console output
prints the same results as `OPT`/`INF`/`WRN`/`ERR` paragraphs under each section, and newer
`--csv --page details` exports as rows with Rule Name/Type/Description columns. All become
`RuleResult`s, so a summary shows NVIDIA's verdict beside ours whatever the input was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# ncu_report.MsgType values, as the console prints them.
KINDS = {0: "NONE", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
# ncu_report.SpeedupType values: a local estimate is relative to the rule's own section.
SPEEDUP_TYPES = {0: "unknown", 1: "local", 2: "global"}
# ncu's link markup: `@url:text:link@` -> "text (link)"; `@section:Id:text@`, `@sass:addr:text@`
# and `@source:file:line:text@` -> text.
_URL = re.compile(r"@url:([^:@]*):([^@]*)@")
_LINK = re.compile(r"@(?:section|sass):[^:@]*:([^@]*)@|@source:[^:@]*:[^:@]*:([^@]*)@")


@dataclass
class RuleResult:
    """One rule's verdict on one kernel: which rule, its message, and NVIDIA's estimated speedup."""

    rule: str  # rule identifier, e.g. SOLBottleneck; the section name where only the console was read
    section: str  # section identifier, e.g. SpeedOfLight
    kind: str  # INF, OPT, WRN or ERR
    title: str
    message: str
    speedup_pct: float | None = None  # estimated speedup in %, where ncu estimated one
    speedup_type: str | None = None  # local (within the section's scope) or global


def plain_text(message: str) -> str:
    """A rule message with ncu's `@kind:...:text@` link markup reduced to its text."""
    linked = _URL.sub(lambda match: f"{match.group(1)} ({match.group(2)})", message)
    return _LINK.sub(lambda match: match.group(1) or match.group(2) or "", linked).strip()


def from_ncu_report(entry: dict[str, Any]) -> RuleResult | None:
    """A RuleResult from one `rule_results_as_dicts()` entry; None for one without a message."""
    message = entry.get("rule_message") or {}
    if not isinstance(message, dict) or not message.get("message"):
        return None
    speedup = entry.get("speedup_estimation") or {}
    value = speedup.get("speedup") if isinstance(speedup, dict) else None
    return RuleResult(
        rule=str(entry.get("rule_identifier") or entry.get("name") or "?"),
        section=str(entry.get("section_identifier") or ""),
        kind=KINDS.get(int(message.get("type", 0)), "NONE"),
        title=str(message.get("title") or ""),
        message=plain_text(str(message["message"])),
        speedup_pct=float(value) if isinstance(value, int | float) else None,
        speedup_type=SPEEDUP_TYPES.get(int(speedup.get("type", 0))) if isinstance(value, int | float) else None,
    )


def rules_of_action(action: Any) -> list[RuleResult]:
    """Every rule result of one `ncu_report` action that has a message (older modules have none)."""
    as_dicts = getattr(action, "rule_results_as_dicts", None)
    if as_dicts is None:
        return []
    try:
        entries = as_dicts()
    except Exception:  # a damaged report's rule data must not lose the kernel's metrics
        return []
    return [rule for rule in (from_ncu_report(entry) for entry in entries) if rule is not None]


def _cell(row: list[str], col: dict[str, int], name: str) -> str:
    index = col.get(name)
    return row[index].strip() if index is not None and index < len(row) else ""


def from_csv_row(row: list[str], col: dict[str, int]) -> RuleResult | None:
    """A RuleResult from an `ncu --csv --page details` row with Rule columns; None for a metric row."""
    rule = _cell(row, col, "Rule Name")
    message = _cell(row, col, "Rule Description")
    if not rule or not message:
        return None
    speedup_text = _cell(row, col, "Estimated Speedup").replace(",", "")
    try:
        speedup: float | None = float(speedup_text) if speedup_text else None
    except ValueError:
        speedup = None
    kind = _cell(row, col, "Rule Type").upper()
    return RuleResult(
        rule=rule,
        section=_cell(row, col, "Section Name"),
        kind=kind if kind in KINDS.values() else "NONE",
        title="",
        message=plain_text(message),
        speedup_pct=speedup,
        speedup_type=(_cell(row, col, "Estimated Speedup Type") or None) if speedup is not None else None,
    )
