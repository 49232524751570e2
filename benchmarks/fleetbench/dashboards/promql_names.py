"""Which metric names a PromQL expression reads (for the "only catalogue metrics" rule)."""

from __future__ import annotations

import re

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NAME_MATCHER = re.compile(r'__name__\s*(=~|=)\s*"([^"]*)"')
KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "atan2",
    "e",
}


def metric_names(expr: str) -> set[str]:
    """Metric names a query selects: bare selectors, and `__name__` matchers (alternatives split)."""
    names: set[str] = set()
    for _op, value in _NAME_MATCHER.findall(expr):
        names.update(part for part in value.split("|") if part)
    text = _STRING.sub('""', expr)
    text = _GROUPING.sub(" ", _RANGE.sub(" ", _MATCHERS.sub(" ", text)))
    for match in _IDENT.finditer(text):
        word = match.group()
        following = text[match.end() :].lstrip()[:1]
        if following == "(" or word.lower() in KEYWORDS or word.startswith("$"):
            continue  # a function call, keyword or variable
        before = text[match.start() - 1] if match.start() else " "
        if before == "$" or before.isdigit() or before == ".":
            continue  # a variable, or the exponent of a number such as 1e3
        names.add(word)
    return names
