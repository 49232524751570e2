"""Small file-system guards shared by everything that writes results."""

from __future__ import annotations

import os
from pathlib import Path

from fleetbench.errors import UserError


def ensure_writable_dir(path: Path, what: str, flag: str) -> Path:
    """Create `path` and prove a file can be written there, before any work starts."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UserError(
            f"{what} {path} is not writable ({exc.strerror or exc}); pass a writable folder with {flag}"
        ) from None
    return path
