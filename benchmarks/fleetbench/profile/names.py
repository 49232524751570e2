"""Kernel and op names short enough for a Prometheus label or a chart, in a stable, documented way.

GPU kernel names are C++ signatures of several hundred characters
(`void cutlass::Kernel<cutlass::gemm::kernel::Gemm<...>>(cutlass::gemm::kernel::Gemm<...>::Params)`).
`short_name` keeps what a person recognises; `label` adds what keeps distinct kernels apart:

1. drop `->`, then every balanced `<...>` (template arguments) and `(...)` (parameter lists,
   `(anonymous namespace)`); an unbalanced `>` or `)` is dropped on its own;
2. drop leading `void` / `static` / `inline` / `__global__` (kernels return void), join the
   remaining words with `_` (`Memcpy HtoD (Pageable -> Device)` gives `Memcpy_HtoD`);
3. keep the last `::` scope; when that is shorter than 12 characters and a scope precedes it,
   keep `scope::name` (`cutlass::Kernel`, `aten::mm`);
4. replace characters outside `[A-Za-z0-9_:.+-]` by `_` and cut to 48 characters;
5. `label` only: when steps 1-4 changed the name, append `~` and the first 6 hex digits of the
   SHA-1 of the full name, so two template instances never share a series and the same kernel gets
   the same label in every report, on every machine.

The full name always stays in the result record next to its label.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

MAX_SHORT = 48
MIN_BASE = 12
_LEADING = frozenset({"void", "static", "inline", "__global__", "extern"})
_UNSAFE = re.compile(r"[^A-Za-z0-9_:.+\-]")


def _strip_brackets(name: str) -> str:
    closing = {">": "<", ")": "("}
    stack: list[str] = []
    for char in name.replace("->", ""):
        if char in closing:
            opener = closing[char]
            if opener not in stack:
                continue  # unbalanced closer (e.g. "unnamed>::k" as some ncu CSVs print it)
            while stack and stack[-1] != opener:
                stack.pop()
            stack.pop()
        else:
            stack.append(char)
    return "".join(stack)


@lru_cache(maxsize=4096)  # a report repeats its kernels' names launch after launch
def short_name(name: str) -> str:
    """Readable short form (steps 1-4 above); for tables and charts."""
    words = _strip_brackets(name).split()
    while len(words) > 1 and words[0] in _LEADING:
        words.pop(0)
    scopes = [part for part in "_".join(words).split("::") if part]
    if not scopes:
        base = name.strip()
    elif len(scopes[-1]) < MIN_BASE and len(scopes) > 1:
        base = f"{scopes[-2]}::{scopes[-1]}"
    else:
        base = scopes[-1]
    base = _UNSAFE.sub("_", base)[:MAX_SHORT]
    return base or "unnamed"


@lru_cache(maxsize=4096)
def label(name: str) -> str:
    """Bounded, stable label value for a kernel or op (step 5 above)."""
    short = short_name(name)
    if short == name:
        return short
    return f"{short}~{hashlib.sha1(name.encode('utf-8')).hexdigest()[:6]}"
