"""The one rule for every name, id and path a user hands the suite, checked before any use.

A path: not empty, no control character (NUL ends a C string; a newline breaks the one-line promise of
every message that shows it), at most NAME_MAX_BYTES bytes per component and PATH_MAX_BYTES in all, in
the file system's encoding (300 bytes of multi-byte Unicode fit in 100 characters). A name (a run id,
a baseline name, a prefix that becomes a folder name): the same, as one component: no '/', not '.' or
'..'. Each problem is one sentence naming the argument, the limit and the value shown cut, so the
operating system's "File name too long" never reaches a user as a crash.

This module imports nothing of ours but errors: the CLI parser, the config loader and the readers of
stored files all use it.
"""

from __future__ import annotations

import os

from fleetbench.errors import UserError

NAME_MAX_BYTES = 255  # Linux NAME_MAX: one path component
PATH_MAX_BYTES = 4096  # Linux PATH_MAX: a whole path, its terminating NUL included
SHOWN_CHARS = 40  # how much of a bad value a message repeats


def shown(value: str) -> str:
    """`value` as a message repeats it: quoted, escaped, cut to SHOWN_CHARS characters with its size."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({byte_length(value)} bytes)"


def byte_length(value: str) -> int:
    """The length of `value` as the file system sees it (undecodable bytes of argv count as one each)."""
    return len(os.fsencode(value))


def _control(value: str) -> str | None:
    """The first control character of `value`, escaped, or None."""
    for char in value:
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return repr(char)[1:-1]
    return None


def path_problem(value: str) -> str | None:
    """What makes `value` no path this suite accepts (see the module docstring), or None."""
    if value == "":
        return "an empty path is not accepted; accepted: a file or folder path"
    control = _control(value)
    if control is not None:
        return f"{shown(value)} holds the control character {control}; accepted: a path without control characters"
    total = byte_length(value)
    if total >= PATH_MAX_BYTES:
        return f"{shown(value)} is {total} bytes long; accepted: a path of at most {PATH_MAX_BYTES - 1} bytes"
    longest = max((part for part in value.split("/")), key=byte_length)
    if byte_length(longest) > NAME_MAX_BYTES:
        return (
            f"{shown(value)} has a component of {byte_length(longest)} bytes; accepted: at most {NAME_MAX_BYTES} "
            "bytes per file or folder name"
        )
    return None


def name_problem(value: str) -> str | None:
    """What makes `value` no name (one path component) this suite accepts, or None."""
    if value == "":
        return "an empty name is not accepted; accepted: 1 to 255 bytes without '/' or control characters"
    if "/" in value:
        return f"{shown(value)} holds '/'; accepted: a name, not a path (no '/')"
    if value in {".", ".."}:
        return f"{value!r} names a folder, not a run; accepted: a name other than '.' and '..'"
    control = _control(value)
    if control is not None:
        return f"{shown(value)} holds the control character {control}; accepted: a name without control characters"
    size = byte_length(value)
    if size > NAME_MAX_BYTES:
        return f"{shown(value)} is {size} bytes long; accepted: a name of at most {NAME_MAX_BYTES} bytes"
    return None


def check_path(value: str | os.PathLike[str], what: str) -> str:
    """`value` as text when it is a path this suite accepts; else a UserError naming `what` (the argument)."""
    text = os.fspath(value)
    problem = path_problem(text)
    if problem is not None:
        raise UserError(f"{what}: {problem}")
    return text


def check_name(value: str, what: str) -> str:
    """`value` when it is a name this suite accepts; else a UserError naming `what` (the argument)."""
    problem = name_problem(value)
    if problem is not None:
        raise UserError(f"{what}: {problem}")
    return value
