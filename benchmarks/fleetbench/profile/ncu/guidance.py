"""NVIDIA's guided analysis beside our class: the top rules of a kernel and where the two disagree.

Nsight Compute's `SOLBottleneck` rule (section SpeedOfLight) states the same thing our class does,
in its own terms: the kernel is busy (one unit above ~80 % of peak: "High Throughput", "... more
heavily utilized than ...") or latency-limited (both below 60 %: "Latency Issue"; "Small Grid").
Where our class says the opposite, both are shown; neither is silently preferred.
"""

from __future__ import annotations

from fleetbench.profile.ncu.rules import RuleResult

BOTTLENECK_RULE = "SOLBottleneck"
SOL_SECTIONS = ("SpeedOfLight", "GPU Speed Of Light Throughput")
_LATENCY_WORDS = ("latency", "small grid", "too small to fill", "tail effect")
_BUSY_WORDS = ("high throughput", "greater than 80", "more heavily utilized", "is utilizing greater")
# Our classes that make a claim NVIDIA's bottleneck rule can contradict.
_OURS = {"latency_bound": "latency", "compute_bound": "busy", "memory_bound": "busy"}
_KIND_ORDER = {"ERR": 0, "WRN": 1, "OPT": 2, "INF": 3, "NONE": 4}


def bottleneck(rules: list[RuleResult]) -> RuleResult | None:
    """NVIDIA's speed-of-light verdict: the SOLBottleneck rule, or the SOL section's advice in console output."""
    for rule in rules:
        if rule.rule == BOTTLENECK_RULE:
            return rule
    return next((rule for rule in rules if rule.section in SOL_SECTIONS), None)


def nvidia_view(rule: RuleResult) -> str | None:
    """'busy' or 'latency' as NVIDIA's bottleneck rule words it; None when it says neither."""
    text = f"{rule.title} {rule.message}".lower()
    if any(word in text for word in _LATENCY_WORDS):
        return "latency"
    if any(word in text for word in _BUSY_WORDS):
        return "busy"
    return None


def headline(rule: RuleResult) -> str:
    """A rule in a few words: its title, else the start of its message."""
    text = rule.title or rule.message.split(". ")[0]
    return text if len(text) <= 60 else text[:57] + "..."


def disagreement(cls: str, rules: list[RuleResult]) -> str | None:
    """A sentence when our class and NVIDIA's bottleneck rule contradict each other, else None."""
    rule = bottleneck(rules)
    ours = _OURS.get(cls)
    if rule is None or ours is None:
        return None
    theirs = nvidia_view(rule)
    if theirs is None or theirs == ours:
        return None
    return f"ours: {cls}; NVIDIA {rule.rule}: {headline(rule)}"


def top_rules(rules: list[RuleResult], count: int = 3) -> list[RuleResult]:
    """The rules worth reading first: errors and warnings, then optimisations by estimated speedup."""
    ranked = sorted(rules, key=lambda r: (_KIND_ORDER.get(r.kind, 5), -(r.speedup_pct or 0.0)))
    return [rule for rule in ranked if rule.kind != "NONE"][:count]
