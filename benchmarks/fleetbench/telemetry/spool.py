"""The on-disk spool: pushes the Pushgateway did not accept wait here until `fleetbench metrics flush`.

Every entry file is checked before anything is pushed from it: JSON with exactly the entry's fields
and types, a valid gateway URL, a non-empty job, a grouping key of label names to strings, and an
exposition that prometheus_client's own text parser reads and serialises again, whose samples agree
with the group. A file that fails is a `BadSpoolEntry` with the reason in one line; the flush moves
it into the spool's `rejected/` folder, never deletes it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import tempfile
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetbench import jsonio
from fleetbench.errors import UserError
from fleetbench.telemetry.exposition import registry_from_exposition

if TYPE_CHECKING:  # pydantic and the config load when an entry is read: a run's push path needs neither
    from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

REJECTED_FOLDER = "rejected"
# A run's exposition is a few hundred kB at most; a file far beyond that is not one of ours.
MAX_ENTRY_BYTES = 64 * 1024 * 1024
_TEMP_PREFIX = ".tmp-"  # entries being written (temp file + rename); never read, never moved
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class BadSpoolEntry(ValueError):
    """A spool file that cannot be delivered; its text is the reason, in one line of at most 300 characters."""

    def __init__(self, reason: str) -> None:
        text = " ".join(reason.split())  # a library's message may span lines or quote a whole bad line
        super().__init__(text if len(text) <= 300 else text[:297] + "...")


@dataclass(frozen=True)
class SpoolEntry:
    """One push that did not get through: where it was going, its group, and the exposition it carried."""

    gateway: str
    job: str
    grouping_key: dict[str, str]
    exposition: str
    spooled_at: float
    reason: str

    def group_id(self) -> str:
        """A file name for the entry's Pushgateway group, so a newer entry replaces an older one."""
        # A push replaces its whole group, so the newest entry for a group is the only one worth keeping.
        key = jsonio.dumps([self.gateway, self.job, sorted(self.grouping_key.items())])
        return hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class RejectedEntry:
    """A spool file that is not a deliverable entry, and why."""

    path: Path
    reason: str


ENTRY_FIELDS = ("gateway", "job", "grouping_key", "exposition", "spooled_at", "reason")


def _grouping_label_names(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__") or name == "job":
            raise ValueError(f"{name!r} is not a grouping label name (a Prometheus label name other than job)")
    return value


@cache
def _entry_model() -> type[BaseModel]:
    """The JSON fields of an entry file, strictly typed (no coercion: a number is not a job name)."""
    from typing import Annotated

    from pydantic import AfterValidator, ConfigDict, Field, create_model

    from fleetbench.urls import check_url

    model: type[BaseModel] = create_model(
        "SpoolEntryFields",
        __config__=ConfigDict(extra="forbid", strict=True),
        gateway=(Annotated[str, AfterValidator(check_url)], ...),
        job=(str, Field(min_length=1)),
        grouping_key=(Annotated[dict[str, str], AfterValidator(_grouping_label_names)], ...),
        exposition=(str, ...),
        spooled_at=(float, Field(ge=0, allow_inf_nan=False)),
        reason=(str, ...),
    )
    assert tuple(model.model_fields) == ENTRY_FIELDS
    return model


def _describe(exc: ValidationError) -> str:
    """The first error of an entry's fields as `field: message`, plus how many more there are."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "entry"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        message = "missing field"
    elif first["type"] == "extra_forbidden":
        message = "unknown field"
    elif len(got := repr(first["input"])) <= 80:
        message += f" (got {got})"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}"


def check_exposition(exposition: str, job: str, grouping_key: dict[str, str]) -> None:
    """Raise BadSpoolEntry unless prometheus_client reads the text, writes it back, and its samples fit the group."""
    from prometheus_client.exposition import generate_latest

    # The parser and writer are prometheus_client's; whatever they raise on this text makes it unusable.
    try:
        registry = registry_from_exposition(exposition)
        generate_latest(registry)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError) as exc:
        raise BadSpoolEntry(f"exposition: not Prometheus text format ({type(exc).__name__}: {exc})") from None
    group = {"job": job, **grouping_key}
    count = 0
    for family in registry.collect():
        for sample in family.samples:
            count += 1
            for name, wanted in group.items():
                got = sample.labels.get(name, wanted)
                if got != wanted:
                    raise BadSpoolEntry(
                        f"exposition: sample {sample.name} has {name}={got!r} but the entry's group has {wanted!r} "
                        "(the Pushgateway would silently relabel it)"
                    )
    if not count:
        raise BadSpoolEntry("exposition: holds no samples")


def parse_entry(data: bytes) -> SpoolEntry:
    """The entry in an entry file's bytes, checked throughout; BadSpoolEntry (one-line reason) otherwise."""
    if not data.strip():
        raise BadSpoolEntry("empty file")
    if len(data) > MAX_ENTRY_BYTES:
        raise BadSpoolEntry(f"{len(data)} bytes, more than an entry's {MAX_ENTRY_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadSpoolEntry(f"not UTF-8 text (byte {exc.start})") from None
    try:
        raw: Any = json.loads(text)
    except RecursionError:
        raise BadSpoolEntry("not JSON: nested too deeply") from None
    except ValueError as exc:
        raise BadSpoolEntry(f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise BadSpoolEntry(f"expected a JSON object with fields {', '.join(ENTRY_FIELDS)}")
    from pydantic import ValidationError

    try:
        fields = _entry_model().model_validate(raw)
    except ValidationError as exc:
        raise BadSpoolEntry(_describe(exc)) from None
    entry = SpoolEntry(**fields.model_dump())
    check_exposition(entry.exposition, entry.job, entry.grouping_key)
    return entry


def read_entry(path: Path) -> SpoolEntry:
    """The checked entry in `path`; BadSpoolEntry when it cannot be read or is not a deliverable entry."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):  # a folder, a FIFO (which would block a read), a device
            raise BadSpoolEntry("a folder, not an entry file" if stat.S_ISDIR(mode) else "not a regular file")
        with path.open("rb") as handle:
            data = handle.read(MAX_ENTRY_BYTES + 1)
    except OSError as exc:
        raise BadSpoolEntry(f"cannot be read ({exc.strerror or exc})") from None
    return parse_entry(data)


def check_spool_dir(directory: Path, what: str) -> None:
    """Raise UserError when `directory` could never hold the spool: it, or the folder it would be made in, is no folder.

    Creates nothing: a run checks this before it starts and makes the folder only when it spools.
    """
    if directory.is_dir():
        return
    if directory.exists():
        raise UserError(f"{what} {directory} is not a folder; pass a folder (it is made when needed)")
    parent = directory.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{what} {directory} cannot be made: {parent} is not a folder; pass another folder")


class Spool:
    """A folder of spooled pushes, one JSON file per Pushgateway group; bad files go to `rejected/`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def rejected_dir(self) -> Path:
        """Where entry files that cannot be delivered are moved, kept for a person to look at."""
        return self.directory / REJECTED_FOLDER

    def put(self, entry: SpoolEntry) -> Path | None:
        """Write atomically (temp file + rename): a crash never leaves half an entry behind.

        Returns the entry's file, or None (logged as an error) when the spool cannot be written: the
        run's metrics are still in its .prom file.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            target = self.directory / f"{entry.group_id()}.json"
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=_TEMP_PREFIX, suffix=".json")
        except OSError as exc:
            log.error("could not spool to %s (%s); the run's .prom file holds its metrics", self.directory, exc)
            return None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                jsonio.dump(asdict(entry), handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            log.error("could not spool to %s (%s); the run's .prom file holds its metrics", self.directory, exc)
            return None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def files(self) -> list[Path]:
        """The entry files, in name order (not those being written, not the rejected ones)."""
        if not self.directory.is_dir():
            return []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError as exc:
            raise UserError(f"cannot list spool {self.directory}: {exc.strerror or exc}") from None
        return [self.directory / name for name in names if name.endswith(".json") and not name.startswith(".")]

    def scan(self) -> tuple[list[tuple[Path, SpoolEntry]], list[RejectedEntry]]:
        """Every entry file, read and checked: the deliverable entries and the rejected files with reasons."""
        good: list[tuple[Path, SpoolEntry]] = []
        bad: list[RejectedEntry] = []
        for path in self.files():
            if not path.exists() and not path.is_symlink():
                continue  # a concurrent flush delivered it
            try:
                good.append((path, read_entry(path)))
            except BadSpoolEntry as exc:
                bad.append(RejectedEntry(path, str(exc)))
        return good, bad

    def entries(self) -> list[tuple[Path, SpoolEntry]]:
        """Every deliverable entry with its file, in name order; files that are not entries are left out."""
        return self.scan()[0]

    def prepare_rejected(self) -> Path:
        """Make `rejected/` before anything is moved there; a UserError (nothing moved) if it cannot be made."""
        try:
            self.rejected_dir.mkdir(exist_ok=True)
        except OSError as exc:
            problem = "is not a folder" if isinstance(exc, FileExistsError) else f"cannot be made ({exc.strerror})"
            raise UserError(
                f"cannot move bad spool entries aside: {self.rejected_dir} {problem}; move it away and flush again"
            ) from None
        return self.rejected_dir

    def reject(self, path: Path) -> Path | None:
        """Move an entry file into `rejected/` under a name no earlier rejection has; None if it is gone.

        Raises OSError when it cannot be moved (it then stays where it is).
        """
        target = self.prepare_rejected() / path.name
        number = 0
        while target.exists() or target.is_symlink():
            number += 1
            target = self.rejected_dir / f"{path.name}.{number}"
        try:
            path.rename(target)
        except FileNotFoundError:
            return None  # a concurrent flush moved it first
        return target

    @staticmethod
    def remove(path: Path) -> None:
        """Delete an entry's file (already gone is fine: a concurrent flush may have taken it)."""
        path.unlink(missing_ok=True)
