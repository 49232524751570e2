"""Small file-system guards shared by everything that reads inputs and writes results.

Each turns what the operating system says into one line that names the path, what is wrong with it
and what would be accepted (a UserError), before any work starts and without creating anything it
does not have to: `check_writable_dir` writes nothing at all, `ensure_writable_dir` creates only the
folder it is asked for, `readable_file` never blocks on a FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from fleetbench.errors import UserError


def name_problem(path: Path) -> str | None:
    """What makes `path` a name the file system refuses (a part or the whole too long), or None."""
    existing = Path("/")
    for parent in reversed(path.absolute().parents):  # from the root down, to the last folder that exists
        try:
            if not parent.is_dir():
                break
        except OSError:  # the name itself is refused: its parent is the one to ask
            break
        existing = parent
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
        path_max = os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    if longest > name_max:
        return f"a name in it is {longest} bytes long; the file system allows {name_max}"
    if len(os.fsencode(str(path.absolute()))) >= path_max:
        return f"the path is {len(os.fsencode(str(path.absolute())))} bytes long; the file system allows {path_max - 1}"
    return None


def _blocker(path: Path) -> Path | None:
    """The first existing path on the way to `path` (itself included) that is not a folder, if any."""
    for candidate in [*reversed(path.parents), path]:
        try:
            if not candidate.is_dir() and candidate.exists():
                return candidate
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                return None  # no file in the way: the name itself is refused (name_problem says how)
            return candidate
    return None


def _why_not_writable(path: Path, exc: OSError | None) -> str:
    problem = name_problem(path)
    if problem is not None:
        return problem
    blocker = _blocker(path)
    if blocker == path:
        return "it is a file, not a folder"
    if blocker is not None:
        return f"{blocker} is a file, not a folder"
    if exc is None:
        return os.strerror(errno.EACCES)
    return exc.strerror or str(exc)


def ensure_writable_dir(path: Path, what: str, flag: str, *, remedy: str | None = None) -> Path:
    """Create `path` and prove a file can be written there, before any work starts.

    The error ends with `remedy`, else "pass a writable folder with FLAG".
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        fix = remedy or f"pass a writable folder with {flag}"
        raise UserError(f"{what} {path} is not writable ({_why_not_writable(path, exc)}); {fix}") from None
    return path


def check_writable_dir(path: Path, what: str, flag: str) -> None:
    """Refuse a folder that could not be created or written, without creating or writing anything.

    The nearest existing folder on the way must be writable (os.access: root passes unless the file
    system is read-only); a file in the way is refused as such. The real proof is the job's own
    `ensure_writable_dir` once it starts to write.
    """
    problem = name_problem(path)
    if problem is not None:
        raise UserError(f"{what} {path} is not a name this file system takes ({problem}); pass another with {flag}")
    loop = next((p for p in [*reversed(path.parents), path] if p.is_symlink() and not p.exists()), None)
    if loop is not None:
        raise UserError(
            f"{what} {path} is not writable ({loop} is a symbolic link that leads nowhere: a loop or a "
            f"missing target); pass a writable folder with {flag}"
        )
    blocker = _blocker(path)
    existing = next((p for p in [path, *path.parents] if p.is_dir()), Path("."))
    if blocker is not None or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(
            f"{what} {path} is not writable ({_why_not_writable(path, None)}); pass a writable folder with {flag}"
        )


def readable_file(path: Path, what: str, accepted: str) -> Path:
    """`path` if it is a regular file this process can open for reading; else one line naming the problem.

    A FIFO, socket or device is refused before it is opened (reading one could block forever).
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserError(f"{what} {path} not found; {accepted}") from None
    except OSError as exc:
        raise UserError(f"{what} {path} cannot be read ({_why_not_readable(path, exc)}); {accepted}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {path} is a folder, not a file; {accepted}")
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {path} is not a regular file (a FIFO, socket or device); {accepted}")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UserError(f"{what} {path} cannot be read ({_why_not_readable(path, exc)}); {accepted}") from None
    return path


def _why_not_readable(path: Path, exc: OSError) -> str:
    blocker = _blocker(path.parent)
    if exc.errno == errno.ENOTDIR and blocker is not None:
        return f"{blocker} is a file, not a folder"
    return exc.strerror or str(exc)


def check_output_file(path: Path, flag: str) -> Path:
    """Refuse, before any work, an output file `flag` names that could never be written: a name the file
    system refuses, a folder, a file in the way of its folder, an immutable or read-only file."""
    problem = name_problem(path)
    if problem is not None:
        raise UserError(f"{flag} {path} is not a name this file system takes ({problem}); pass a shorter path")
    _refuse_unreplaceable(path, f"{flag} {path}")
    blocker = _blocker(path.parent)
    if blocker is not None:
        raise UserError(f"{flag} {path} cannot be written: {blocker} is a file, not a folder; pass another path")
    return path


def _refuse_unreplaceable(path: Path, what: str) -> None:
    """A UserError when `path` exists and may not be replaced: a folder, or a file this process may not write
    (read-only, or immutable: `chattr +i` refuses even root), checked before a temporary file is made."""
    try:
        if path.is_dir():
            raise UserError(f"{what}: cannot write {path}: it is a folder; pass a file path")
        if path.exists() and not os.access(path, os.W_OK):
            raise UserError(
                f"{what}: cannot write {path}: the file is read-only or immutable (chattr +i); "
                "make it writable (chmod u+w, chattr -i) or pass another path"
            )
    except OSError:
        return  # the write itself says why (a name too long, a file in the way)


def _mode_for(path: Path) -> int:
    """The permissions `path` has, or those a new file gets under this process's umask."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(path.stat().st_mode)
    mask = os.umask(0o022)  # reading the umask means setting it: put straight back
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: Path, what: str) -> Iterator[Path]:
    """A temporary path beside `path` to write to; renamed onto `path` when the block ends, removed when it
    fails, so neither half a file nor a `.tmp` is ever left. An OSError is a UserError naming `what`."""
    import tempfile

    problem = name_problem(path)
    if problem is not None:
        raise UserError(f"{what}: cannot write {path}: not a name this file system takes ({problem})")
    _refuse_unreplaceable(path, what)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise UserError(f"{what}: cannot write {path} ({_why_not_writable(path.parent, exc)})") from None
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, _mode_for(path))  # mkstemp makes it private; the file gets what a plain write gives
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{what}: cannot write {path} ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str, what: str) -> Path:
    """Write `text` to `path` through a temporary file and a rename: a reader sees the old file or the new,
    never half of one; a failure is a UserError naming `what` and the path, and leaves no temporary file."""
    with atomic_path(path, what) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def write_bytes_atomic(path: Path, data: bytes, what: str) -> Path:
    """`write_text_atomic` for bytes."""
    with atomic_path(path, what) as tmp:
        tmp.write_bytes(data)
    return path


def refuse_foreign_file(path: Path, flag: str, force: bool, mark: bytes | None = None) -> None:
    """Refuse to replace an existing file `path` that this command did not write, unless `force` (--force).

    A file counts as the command's own when `mark` (what the command writes into every file it makes, e.g.
    a PNG's Software text) is in its first 64 KiB; without a mark every existing file is foreign. A user's
    file is never lost without a word (pyperf's -o refuses an existing file the same way).
    """
    if force:
        return
    try:
        info = path.lstat()
    except OSError:
        return  # nothing there (or the write itself says why: a name too long)
    if stat.S_ISLNK(info.st_mode) or not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        # a rename would replace the link or the FIFO itself, and a FIFO would block a read of its head
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "a FIFO, socket or device"
        raise UserError(
            f"{flag} {path}: {kind} is there, not a file this command wrote; pass --force to replace it, or another path"
        )
    try:
        if not path.is_file():
            return
        with path.open("rb") as handle:
            head = handle.read(65536)
    except OSError:
        return  # the write itself says why (a folder in the way, a name too long)
    if mark is not None and mark in head:
        return
    raise UserError(
        f"{flag} {path}: the file exists and was not written by this command; pass --force to replace it, "
        "or another path"
    )
