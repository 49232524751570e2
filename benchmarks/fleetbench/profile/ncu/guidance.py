"""NVIDIA's guided analysis beside our class: the top rules of a kernel, NVIDIA's verdict, where the two disagree.

Nsight Compute's `SOLBottleneck` rule (section SpeedOfLight, a Python rule in ncu's `sections/` folder)
states what our class states, on the same figures and, by default, the same thresholds
(fleetbench.profile.classify). Its message says which case it found, and is read back into our class
names (`nvidia_verdict`) in every wording of the rule the reports and logs carry:

  "High Throughput" / "utilizing greater than 80.0%"   compute_bound when it sends the reader to the
      Compute Workload Analysis section, memory_bound when to the Memory Workload Analysis one
      ("Start by analyzing L2 in ...": the level too)
  "High Compute Throughput" / "Compute is more heavily utilized than Memory"   compute_bound
  "High Memory Throughput" / "Memory is more heavily utilized than Compute"    memory_bound
      ("... to identify the L1 bottleneck": the level)
  "Balanced Throughput" / "Compute and Memory are well-balanced"               balanced
  "Latency Issue" / "Small Grid" / "latency issues" / "too small to fill"      latency_bound

Where our class says otherwise, for any class (balanced included), both are shown and the summary says
why where it can (`explain`): our figures derived rather than measured, thresholds set away from
NVIDIA's, a figure at a threshold to the precision the file prints it, the weighted figures of a
kernel's launches crossing a threshold none of them crosses. Neither is silently preferred.
"""

from __future__ import annotations

import re

from fleetbench.profile.ncu.rules import RuleResult

BOTTLENECK_RULE = "SOLBottleneck"
SOL_SECTIONS = ("SpeedOfLight", "GPU Speed Of Light Throughput", "GPU Speed Of Light")
_LATENCY = ("latency issue", "small grid", "too small to fill")
_BUSY = ("high throughput", "greater than 80", "is utilizing greater")
_COMPUTE = ("high compute throughput", "compute is more heavily utilized")
_MEMORY = ("high memory throughput", "memory is more heavily utilized")
_BALANCED = ("balanced throughput", "well-balanced")
_LEVEL = re.compile(r"(?:identify the|start by analyzing) (DRAM|L1|L2)\b", re.IGNORECASE)
_KIND_ORDER = {"ERR": 0, "WRN": 1, "OPT": 2, "INF": 3, "NONE": 4}


def bottleneck(rules: list[RuleResult]) -> RuleResult | None:
    """NVIDIA's speed-of-light verdict: the SOLBottleneck rule, or the SOL section's advice in console output."""
    for rule in rules:
        if rule.rule == BOTTLENECK_RULE:
            return rule
    return next((rule for rule in rules if rule.section in SOL_SECTIONS and nvidia_verdict(rule)[0]), None)


def nvidia_verdict(rule: RuleResult) -> tuple[str | None, str | None]:
    """NVIDIA's bottleneck rule as our class and memory level; (None, None) when it says none of its cases."""
    text = f"{rule.title} {rule.message}".lower()
    level_match = _LEVEL.search(text)
    level = level_match[1].upper() if level_match else None
    if any(word in text for word in _LATENCY) or "latency issues" in text:
        return "latency_bound", None
    if any(word in text for word in _BALANCED):
        return "balanced", None
    if any(word in text for word in _COMPUTE):
        return "compute_bound", None
    if any(word in text for word in _MEMORY):
        return "memory_bound", level
    if any(word in text for word in _BUSY):
        if "compute workload analysis" in text:
            return "compute_bound", None
        if "memory workload analysis" in text:
            return "memory_bound", level
    return None, None


def headline(rule: RuleResult) -> str:
    """A rule in a few words: its title, else the start of its message."""
    text = rule.title or rule.message.split(". ")[0]
    return text if len(text) <= 60 else text[:57] + "..."


def disagreement(cls: str, rules: list[RuleResult], why: str | None = None) -> str | None:
    """A sentence when our class and NVIDIA's bottleneck rule differ (any class, balanced included), else None."""
    rule = bottleneck(rules)
    if rule is None:
        return None
    theirs = nvidia_verdict(rule)[0]
    if theirs is None or theirs == cls or cls not in ("memory_bound", "compute_bound", "balanced", "latency_bound"):
        return None
    said = f"ours: {cls}; NVIDIA {rule.rule}: {headline(rule)} ({theirs})"
    return f"{said}; why: {why}" if why else said


def top_rules(rules: list[RuleResult], count: int = 3) -> list[RuleResult]:
    """The rules worth reading first: errors and warnings, then optimisations by estimated speedup."""
    ranked = sorted(rules, key=lambda r: (_KIND_ORDER.get(r.kind, 5), -(r.speedup_pct or 0.0)))
    return [rule for rule in ranked if rule.kind != "NONE"][:count]
