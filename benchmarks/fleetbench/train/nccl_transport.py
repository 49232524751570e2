"""Which network NCCL chose, from its INFO lines (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET), and a warning
when it fell back to TCP sockets on a node that has InfiniBand devices.

NCCL says `NET/IB : Using [0]mlx5_0:1/IB ...` or `NET/Socket : Using [0]eth0:10.0.0.11<0>` when it opens a
network plugin, and `Using network IB` (or `Socket`) when it picks one. The train launcher points
NCCL_DEBUG_FILE at its scratch folder when NCCL_DEBUG is INFO, reads the ranks' files after the job and
writes what it found to the run folder (nccl-transport.json).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

USING_NETWORK = re.compile(r"NCCL INFO Using network (\w+)")
NET_DEVICES = re.compile(r"NCCL INFO NET/(\w+)\s*: Using (.+)")
DEVICE = re.compile(r"\[\d+\](\S+)")
INFINIBAND = Path("/dev/infiniband")


@dataclass
class NcclTransport:
    """The networks NCCL used (IB, Socket, or a plugin's name) and the devices it named."""

    networks: list[str] = field(default_factory=list)
    devices: dict[str, list[str]] = field(default_factory=dict)

    @property
    def fell_back_to_sockets(self) -> bool:
        """Whether some rank used TCP sockets for the network."""
        return "Socket" in self.networks


def parse(text: str) -> NcclTransport:
    """The transport from NCCL's log lines (every rank's, in any order)."""
    found = NcclTransport()
    for line in text.splitlines():
        if match := USING_NETWORK.search(line):
            if match.group(1) not in found.networks:
                found.networks.append(match.group(1))
        elif match := NET_DEVICES.search(line):
            names = DEVICE.findall(match.group(2).split(";")[0])
            known = found.devices.setdefault(match.group(1), [])
            known.extend(name for name in names if name not in known)
    return found


def infiniband_present(root: Path = INFINIBAND) -> bool:
    """Whether the node has InfiniBand verbs devices (/dev/infiniband/uverbs*)."""
    return root.is_dir() and any(root.glob("uverbs*"))


def warning(transport: NcclTransport, has_infiniband: bool) -> str | None:
    """The warning to give, or None: sockets chosen although the node has InfiniBand."""
    if has_infiniband and transport.fell_back_to_sockets:
        used = ", ".join(transport.devices.get("Socket", [])) or "a TCP interface"
        return (
            f"NCCL fell back to TCP sockets ({used}) on a node with InfiniBand devices: check that the container "
            "has /dev/infiniband and memlock unlimited, NCCL_IB_HCA names the node's HCAs and NCCL_IB_DISABLE is unset"
        )
    return None


def read_logs(folder: Path) -> NcclTransport:
    """The transport from every `nccl.*` debug file in `folder` (NCCL_DEBUG_FILE=folder/nccl.%h.%p.log)."""
    text = "\n".join(path.read_text(errors="replace") for path in sorted(folder.glob("nccl.*")))
    return parse(text)
