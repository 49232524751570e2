"""`fleetbench images save/load`: images as tar streams, for clusters and device farms with no registry.

`save` writes one archive with every tag of each chosen image (layers shared between images, such as
the trainer's and the edge runner's Python layer, are stored once); `load` reads such an archive.
`-` means standard output / input, so `fleetbench images save trainer -o - | ssh node docker load`
works too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from fleetbench.errors import UserError
from fleetbench.images.container import find_image
from fleetbench.images.engine import connect
from fleetbench.images.specs import DEFAULT_NAMESPACE, get_spec

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

CHUNK = 1 << 20


def image_refs(client: docker.DockerClient, names: list[str], namespace: str, variant: str | None) -> list[str]:
    """Every tag of the chosen image of each name (the version tag and latest)."""
    refs: list[str] = []
    for name in names:
        spec = get_spec(name)
        chosen = find_image(client, spec, namespace, variant, None, False)
        image = client.images.get(chosen)
        repository = spec.repository(namespace)
        refs += [t for t in image.tags if t.startswith(repository + ":") and t not in refs]
    return refs


def save_images(
    names: list[str],
    output: str,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    variant: str | None = None,
    client: docker.DockerClient | None = None,
) -> int:
    """Write every tag of `names` to one archive (`-`: standard output); returns the bytes written."""
    if not names:
        raise UserError("name at least one image to save (e.g. trainer edge-vulkan)")
    if output == "-" and sys.stdout.isatty():
        raise UserError("refusing to write an image archive to a terminal: pass -o FILE or redirect stdout")
    for name in names:
        get_spec(name)
    client = client or connect()
    refs = image_refs(client, names, namespace, variant)
    api = client.api
    response = api.get(
        f"{api.base_url}/v{api.api_version}/images/get", params={"names": refs}, stream=True, timeout=None
    )
    if response.status_code != 200:
        raise UserError(f"the engine refused to save {', '.join(refs)}: {response.text.strip()[:200]}")
    written = 0
    target: BinaryIO
    if output == "-":
        target = sys.stdout.buffer
        for chunk in response.iter_content(CHUNK):
            target.write(chunk)
            written += len(chunk)
        target.flush()
    else:
        path = Path(output)
        partial = path.with_name(path.name + ".partial")
        try:
            with partial.open("wb") as target:
                for chunk in response.iter_content(CHUNK):
                    target.write(chunk)
                    written += len(chunk)
        except OSError as exc:
            raise UserError(f"-o {output}: cannot write ({exc.strerror})") from None
        partial.replace(path)
    log.info("saved %s: %.0f MB -> %s", ", ".join(refs), written / 1e6, output)
    return written


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(CHUNK):
        yield chunk


def load_images(source: str, *, client: docker.DockerClient | None = None) -> list[str]:
    """Load an archive written by `images save` (`-`: standard input); returns the loaded image names."""
    from docker.errors import APIError

    client = client or connect()
    if source == "-":
        stream: BinaryIO = sys.stdin.buffer
    else:
        path = Path(source)
        if not path.is_file():
            raise UserError(f"-i {source}: no such file (an archive written by `fleetbench images save`)")
        stream = path.open("rb")
    loaded: list[str] = []
    try:
        # docker-stubs leave APIClient.load_image unannotated.
        for message in client.api.load_image(_chunks(stream)):  # type: ignore[no-untyped-call]
            if "error" in message:
                raise UserError(f"loading {source} failed: {' '.join(str(message['error']).split())}")
            text = str(message.get("stream", "")).strip()
            if text.startswith("Loaded image"):
                loaded.append(text.split(": ", 1)[-1])
    except APIError as exc:
        reason = " ".join(str(exc.explanation or exc).split())
        raise UserError(
            f"loading {source} failed: {reason} (expected an archive from `fleetbench images save`)"
        ) from None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if not loaded:
        raise UserError(f"loading {source} failed: the archive has no image")
    log.info("loaded %s", ", ".join(loaded))
    return loaded
