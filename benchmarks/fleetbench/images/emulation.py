"""Running another architecture's binaries on this host: qemu-user-static through binfmt_misc.

An arm64 image built on an x86-64 machine runs every `RUN` step (and debootstrap's second stage) as
aarch64 programs; the kernel hands them to qemu when binfmt_misc has an entry for the architecture.
The entry must carry the F flag (the interpreter opened when registered), so it works inside
containers and chroots, which have no /usr/libexec/qemu-binfmt of their own. `make setup` installs
Debian's qemu-user-static and registers its entry (scripts/setup.sh); this module only checks.
"""

from __future__ import annotations

import platform
from pathlib import Path

from fleetbench.errors import UserError
from fleetbench.images.specs import ARCHES

BINFMT = Path("/proc/sys/fs/binfmt_misc")


def host_arch() -> str | None:
    """This host's Docker architecture name (amd64, arm64), None for one the images are not built for."""
    machine = platform.machine()
    return next((arch for arch, name in ARCHES.items() if name == machine), None)


def missing(arch: str, binfmt: Path = BINFMT) -> str | None:
    """Why `arch`'s binaries cannot run here (one line), or None: natively, or through a qemu entry of
    binfmt_misc that is enabled and has the F flag."""
    machine = ARCHES[arch]
    if platform.machine() == machine:
        return None
    entry = binfmt / f"qemu-{machine}"
    fix = "run `make setup` as root (installs qemu-user-static and registers it)"
    if not (binfmt / "register").exists():
        return f"{arch} images need binfmt_misc, which is not mounted at {binfmt}: {fix}"
    try:
        # "enabled", "interpreter PATH", "flags: POF", ...: the first word, then the rest
        fields = {line.partition(" ")[0]: line.partition(" ")[2] for line in entry.read_text().splitlines()}
    except OSError:
        return f"{arch} images need qemu-user-static registered in binfmt_misc ({entry} is missing): {fix}"
    if "enabled" not in fields:
        return f"{arch} images need the binfmt_misc entry {entry}, which is disabled: {fix}"
    if "F" not in fields.get("flags:", ""):
        return (
            f"{arch} images need the binfmt_misc entry {entry} with the F flag (containers cannot open its "
            f"interpreter {fields.get('interpreter', '?')} otherwise): register Debian's qemu-user-static entry"
        )
    return None


def require(arch: str) -> None:
    """UserError with `missing`'s line when `arch`'s binaries cannot run here."""
    why = missing(arch)
    if why:
        raise UserError(why)
