"""The on-disk spool: pushes the Pushgateway did not accept wait here until `fleetbench metrics flush`."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from fleetbench import jsonio
from fleetbench.errors import UserError


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


class Spool:
    """A folder of spooled pushes, one JSON file per Pushgateway group."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, entry: SpoolEntry) -> Path:
        """Write atomically (temp file + rename): a crash never leaves half an entry behind."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"{entry.group_id()}.json"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                jsonio.dump(asdict(entry), handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def entries(self) -> list[tuple[Path, SpoolEntry]]:
        """Every entry with its file, in name order; a file that is not an entry is a UserError."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                found.append((path, SpoolEntry(**json.loads(path.read_text(encoding="utf-8")))))
            except (OSError, ValueError, TypeError) as exc:
                raise UserError(f"{path}: not a spool entry ({exc}); move it away and flush again") from None
        return found

    @staticmethod
    def remove(path: Path) -> None:
        """Delete an entry's file (already gone is fine: a concurrent flush may have taken it)."""
        path.unlink(missing_ok=True)
