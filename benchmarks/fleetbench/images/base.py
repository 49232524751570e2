"""The local base image of the `cpu` variants, made offline: debootstrap of Debian 12 + `docker import`.

No registry can be reached on the development and CI machines, so no base image can be pulled. This
builds `<namespace>/base:bookworm` from the Debian mirror (minbase + python3, python3-venv,
ca-certificates, slimmed like Debian's own -slim images) and imports it. It takes about a minute or
two; it is skipped when an image with the same recipe label exists.

For arm64 (`<namespace>/base:bookworm-arm64`) debootstrap fetches Debian's arm64 packages and runs
their maintainer scripts under qemu (images/emulation), and the import marks the image linux/arm64.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fleetbench import jsonio
from fleetbench.envvars import DEBIAN_MIRROR_ENV, DEBIAN_SECURITY_MIRROR_ENV
from fleetbench.errors import UserError
from fleetbench.images import emulation
from fleetbench.images.specs import DEFAULT_ARCH, LOCAL_BASE_TAG, local_base
from fleetbench.job import Progress, SilentProgress

if TYPE_CHECKING:
    import docker

SUITE = LOCAL_BASE_TAG
PACKAGES = ("python3", "python3-venv", "ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
RECIPE_LABEL = "io.fleetbench.base.recipe"
# Inherited by every image built on the base, intermediate stages included: `docker image prune
# --filter label=io.fleetbench.namespace=NS` finds what a namespace left behind.
NAMESPACE_LABEL = "io.fleetbench.namespace"
RECIPE_VERSION = 1
DEBOOTSTRAP_TIMEOUT_S = 1200

log = logging.getLogger(__name__)

APT_CONF = """\
// fleetbench base: no recommends, no translations, no package cache left in layers (as Debian's images)
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
"""
DPKG_SLIM = """\
# fleetbench base: keep documentation, manuals and translations out of the image (copyrights stay)
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
"""
POLICY_RC = "#!/bin/sh\n# no service starts while an image is built\nexit 101\n"


def mirrors() -> tuple[str, str]:
    """The Debian and security mirrors: $FLEETBENCH_DEBIAN_MIRROR and $FLEETBENCH_DEBIAN_SECURITY_MIRROR, else deb.debian.org."""
    return (
        os.environ.get(DEBIAN_MIRROR_ENV, DEFAULT_MIRROR).rstrip("/"),
        os.environ.get(DEBIAN_SECURITY_MIRROR_ENV, DEFAULT_SECURITY_MIRROR).rstrip("/"),
    )


def sources(mirror: str, security: str) -> str:
    """The base's apt sources (deb822): the suite, its updates and its security updates."""
    return (
        f"Types: deb\nURIs: {mirror}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {security}\nSuites: {SUITE}-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )


def recipe_hash(arch: str = DEFAULT_ARCH) -> str:
    """A short hash of what goes into the base; a base labelled with another one is made again."""
    recipe: dict[str, object] = {
        "v": RECIPE_VERSION, "suite": SUITE, "packages": PACKAGES, "apt": APT_CONF, "dpkg": DPKG_SLIM
    }  # fmt: skip
    if arch != DEFAULT_ARCH:  # amd64's hash stays what it was: existing bases stay current
        recipe["arch"] = arch
    return hashlib.sha256(jsonio.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def base_exists(client: docker.DockerClient, ref: str, arch: str = DEFAULT_ARCH) -> bool:
    """Whether `ref` is on the engine and was made from the current recipe."""
    from docker.errors import ImageNotFound

    try:
        image = client.images.get(ref)
    except ImageNotFound:
        return False
    same_arch = image.attrs.get("Architecture") == arch  # an engine's import can mark it as its own
    return same_arch and bool((image.labels or {}).get(RECIPE_LABEL) == recipe_hash(arch))


def ensure_base(
    client: docker.DockerClient,
    namespace: str,
    work_dir: Path,
    rebuild: bool = False,
    progress: Progress | None = None,
    arch: str = DEFAULT_ARCH,
) -> tuple[str, bool]:
    """The local base's reference for `arch`, built first when missing; returns (ref, built_now)."""
    progress = progress or SilentProgress()
    ref = local_base(namespace, arch)
    if not rebuild and base_exists(client, ref, arch):
        log.debug("base %s: up to date (recipe %s)", ref, recipe_hash(arch))
        return ref, False
    if os.geteuid() != 0:
        raise UserError(
            f"the local base image {ref} is missing and making it needs root (debootstrap): "
            "run `sudo .venv/bin/fleetbench images base` once, or build the cuda variant"
        )
    if not shutil.which("debootstrap"):
        raise UserError(
            f"the local base image {ref} is missing and debootstrap is not installed: "
            "`apt-get install debootstrap` (or `make setup`)"
        )
    emulation.require(arch)
    mirror, security = mirrors()
    log.info(
        "base %s: debootstrap --variant=minbase %s from %s (+%s); takes a minute or two, once",
        ref,
        SUITE,
        mirror,
        ", ".join(PACKAGES),
    )
    started = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    with _scratch(work_dir) as scratch:
        rootfs = scratch / "rootfs"
        _debootstrap(rootfs, mirror, progress, arch)
        _slim(rootfs, mirror, security)
        archive = scratch / "rootfs.tar"
        with progress.task("base", f"{ref}: packing and importing the root file system"):
            subprocess.run(
                ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
                check=True,
                capture_output=True,
            )
            repository, tag = ref.rsplit(":", 1)
            changes = [
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                'CMD ["bash"]',
                f"LABEL {RECIPE_LABEL}={recipe_hash(arch)}",
                f"LABEL {NAMESPACE_LABEL}={namespace}",
                f"LABEL org.opencontainers.image.title=fleetbench-base-{SUITE}",
                f"LABEL org.opencontainers.image.description=Debian-{SUITE}-minbase-python3-(debootstrap)",
                f"LABEL org.opencontainers.image.created={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
            ]
            _import(client, archive, repository, tag, changes, arch)
    size = client.images.get(ref).attrs.get("Size", 0)
    log.info("base %s: %.0f MB, made in %.0f s", ref, size / 1e6, time.monotonic() - started)
    return ref, True


def _import(
    client: docker.DockerClient, archive: Path, repository: str, tag: str, changes: list[str], arch: str
) -> None:
    """`docker import` of the root file system; for another architecture than the engine's, a build
    `FROM scratch` + `ADD` of it for linux/<arch> instead: engines before 23.0 import every file system as
    their own architecture (their import takes only the OS of a platform), and builds FROM such a base
    for another platform are refused."""
    if arch == emulation.host_arch():
        client.api.import_image_from_file(str(archive), repository=repository, tag=tag, changes=changes)
        return
    (archive.parent / "Dockerfile").write_text("\n".join(["FROM scratch", f"ADD {archive.name} /", *changes]) + "\n")
    (archive.parent / ".dockerignore").write_text("*\n!Dockerfile\n!" + archive.name + "\n")
    from docker.errors import BuildError

    try:
        client.images.build(
            path=str(archive.parent), tag=f"{repository}:{tag}", platform=f"linux/{arch}", rm=True, pull=False
        )
    except BuildError as exc:
        raise UserError(f"importing the {arch} base {repository}:{tag} failed: {exc.msg}") from None


def _debootstrap(rootfs: Path, mirror: str, progress: Progress, arch: str = DEFAULT_ARCH) -> None:
    argv = [
        "debootstrap",
        f"--arch={arch}",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        SUITE,
        str(rootfs),
        mirror,
    ]
    tail: list[str] = []
    seen_verbs: set[str] = set()
    with progress.task("base", "debootstrap: starting") as task:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
        )
        assert process.stdout is not None
        deadline = time.monotonic() + DEBOOTSTRAP_TIMEOUT_S
        for raw in process.stdout:
            line = raw.rstrip()
            if not line:
                continue
            tail = [*tail[-29:], line]
            task.update(f"debootstrap: {line[:100]}")
            verb = line.split()[1] if line.startswith("I: ") and len(line.split()) > 1 else line
            if verb not in seen_verbs:  # one line per phase in logs: Retrieving, Validating, Extracting, ...
                seen_verbs.add(verb)
                log.info("debootstrap: %s", line)
            if time.monotonic() > deadline:
                process.kill()
                break
        code = process.wait()
    if code != 0:
        last = next((item for item in reversed(tail) if item.startswith("E:")), tail[-1] if tail else "no output")
        log.error("debootstrap's last lines:%s", "".join(f"\n  {item}" for item in tail[-15:]))
        raise UserError(f"debootstrap of the local base failed (exit {code}): {last}")


def _slim(rootfs: Path, mirror: str, security: str) -> None:
    """Apt sources with updates and security, apt/dpkg settings, no docs, caches or host identity."""
    _configure_apt(rootfs, mirror, security)
    _strip_docs_and_caches(rootfs)
    # Docker supplies these at run time; the build host's values must not end up in a layer.
    for name in ("etc/resolv.conf", "etc/hostname", "etc/machine-id"):
        target = rootfs / name
        if target.exists() or target.is_symlink():
            target.unlink()
            target.write_text("")
    (rootfs / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")


def _configure_apt(rootfs: Path, mirror: str, security: str) -> None:
    """deb822 sources, the no-recommends/no-cache apt settings, dpkg's path excludes, no service starts."""
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(sources(mirror, security))
    (rootfs / "etc/apt/apt.conf.d/90fleetbench").write_text(APT_CONF)
    (rootfs / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc/dpkg/dpkg.cfg.d/90fleetbench-slim").write_text(DPKG_SLIM)
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text(POLICY_RC)
    policy.chmod(0o755)


def _strip_docs_and_caches(rootfs: Path) -> None:
    """What debootstrap installed before the dpkg excludes existed: manuals, locales, docs, lists, caches, logs."""
    for pattern in ("usr/share/man/*", "usr/share/info/*", "usr/share/lintian/*", "var/lib/apt/lists/*"):
        for path in rootfs.glob(pattern):
            _remove(path)
    for path in (rootfs / "usr/share/locale").glob("*"):
        if path.name != "locale.alias":
            _remove(path)
    for doc in (rootfs / "usr/share/doc").glob("*"):
        for item in doc.iterdir() if doc.is_dir() and not doc.is_symlink() else ():
            if item.name != "copyright":
                _remove(item)
    for pattern in ("var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "var/log/*.log", "var/log/apt/*"):
        for path in rootfs.glob(pattern):
            _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def _scratch(work_dir: Path) -> Iterator[Path]:
    scratch = Path(tempfile.mkdtemp(prefix="base-", dir=work_dir))
    try:
        yield scratch
    finally:
        _unmount_below(scratch)
        shutil.rmtree(scratch, ignore_errors=True)


def _unmount_below(path: Path) -> None:
    """debootstrap mounts /proc and /sys in the target; an interrupted run can leave them mounted."""
    prefix = str(path.resolve())
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for mount in sorted((m for m in mounts if m.startswith(prefix + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
