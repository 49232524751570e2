"""A GPU node's pre-flight report: driver and its CUDA vs the image's, GPUs seen, ECC and XID errors,
persistence mode, clocks, InfiniBand links, DCGM's quick diagnostic. Standalone (standard library only):
the deploy's gpu_preflight role runs this file on each node with the node's python3.

    python3 gpu_preflight.py --image-cuda 12.8 --gpus 8 [--require-ib] [--dcgm-diag]

It prints one JSON object (`ok`, `failures`, and what each command said) and exits 0; the playbook judges.
Nothing passes by default: a command that is missing or fails is a failure, never a pass.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Gpu:
    """One GPU as `nvidia-smi -q -x` describes it."""

    index: int
    name: str
    bus_id: str
    persistence_mode: str
    ecc_mode: str
    uncorrectable_ecc: int | None  # volatile double-bit / uncorrectable since the driver loaded
    remap_failure: bool
    sm_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    throttle_active: str | None  # clocks_event_reasons (or clocks_throttle_reasons) bitmask


@dataclass
class IbPort:
    """One InfiniBand port as `ibstat` prints it."""

    ca: str
    port: int
    state: str
    physical_state: str
    rate_gbps: float | None
    link_layer: str


@dataclass
class Report:
    """Everything the node said, and what fails it."""

    driver_version: str | None = None
    driver_cuda: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    ib_ports: list[IbPort] = field(default_factory=list)
    dcgm_diag: dict[str, str] = field(default_factory=dict)
    xids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing failed."""
        return not self.failures


def _text(node: ET.Element | None, path: str) -> str | None:
    found = node.find(path) if node is not None else None
    return found.text.strip() if found is not None and found.text and found.text.strip() != "N/A" else None


def _int(value: str | None) -> int | None:
    match = re.match(r"\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def _uncorrectable(gpu: ET.Element) -> int | None:
    """Volatile uncorrectable ECC errors: the newer layout's sram/dram_uncorrectable, the older double_bit."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    newer = [_int(_text(volatile, name)) for name in ("sram_uncorrectable", "dram_uncorrectable")]
    if any(v is not None for v in newer):
        return sum(v or 0 for v in newer)
    return _int(_text(volatile, "double_bit/total"))


def parse_nvidia_smi_xml(text: str) -> tuple[str | None, str | None, list[Gpu]]:
    """(driver version, the CUDA version the driver supports, GPUs) from `nvidia-smi -q -x`."""
    root = ET.fromstring(text)
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"not nvidia-smi -q -x output (root element {root.tag!r})")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        reasons = gpu.find("clocks_event_reasons")
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
        minor = _int(_text(gpu, "minor_number"))
        gpus.append(
            Gpu(
                index=minor if minor is not None else index,
                name=_text(gpu, "product_name") or "?",
                bus_id=gpu.get("id", "?"),
                persistence_mode=_text(gpu, "persistence_mode") or "?",
                ecc_mode=_text(gpu, "ecc_mode/current_ecc") or "?",
                uncorrectable_ecc=_uncorrectable(gpu),
                remap_failure=(_text(gpu, "remapped_rows/remapped_row_failure") or "No") != "No",
                sm_clock_mhz=_int(_text(gpu, "clocks/sm_clock")),
                max_sm_clock_mhz=_int(_text(gpu, "max_clocks/sm_clock")),
                throttle_active=_text(reasons, "clocks_event_reasons_active")
                or _text(reasons, "clocks_throttle_reasons_active"),
            )
        )
    return _text(root, "driver_version"), _text(root, "cuda_version"), gpus


def parse_ibstat(text: str) -> list[IbPort]:
    """Every port of every CA in `ibstat`'s output."""
    ports: list[IbPort] = []
    ca, port = "", 0
    fields: dict[str, str] = {}
    for line in [*text.splitlines(), "CA 'end'"]:
        ca_match = re.match(r"^CA '([^']+)'", line)
        port_match = re.match(r"^\s+Port (\d+):", line)
        if (ca_match or port_match) and port:
            rate = _int(fields.get("Rate"))
            ports.append(
                IbPort(
                    ca,
                    port,
                    fields.get("State", "?"),
                    fields.get("Physical state", "?"),
                    float(rate) if rate is not None else None,
                    fields.get("Link layer", "?"),
                )
            )
            port, fields = 0, {}
        if ca_match:
            ca = ca_match.group(1)
        elif port_match:
            port = int(port_match.group(1))
        elif port and ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    return ports


def parse_dcgmi_diag(text: str) -> dict[str, str]:
    """Each test's result (Pass, Skip, Warn, Fail) from `dcgmi diag -r N`'s table."""
    results = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].split(" ")[0] in {"Pass", "Fail", "Warn", "Skip"}:
            results[cells[0]] = cells[1].split(" ")[0]
    return results


XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def parse_xids(kernel_log: str) -> list[str]:
    """`PCI:bus: code` of every XID the driver logged in the kernel log."""
    return [f"{bus}: {code}" for bus, code in XID.findall(kernel_log)]


def _run(argv: list[str], timeout_s: float = 120) -> tuple[str | None, str | None]:
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found on PATH"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{' '.join(argv)}: {exc}"
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()[:1]
        return None, f"{' '.join(argv)} exited {done.returncode}: {' '.join(first)}"
    return done.stdout, None


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text or ""))[:2]


def check_gpus(report: Report, image_cuda: str, expect_gpus: int | None) -> None:
    """nvidia-smi: driver vs the image's CUDA, GPU count, persistence, ECC, row remapping, clocks."""
    out, why = _run(["nvidia-smi", "-q", "-x"])
    if out is None:
        report.failures.append(f"nvidia-smi: {why}")
        return
    try:
        report.driver_version, report.driver_cuda, report.gpus = parse_nvidia_smi_xml(out)
    except (ET.ParseError, ValueError) as exc:
        report.failures.append(f"nvidia-smi -q -x: unreadable output ({exc})")
        return
    if _version(report.driver_cuda) < _version(image_cuda):
        report.failures.append(
            f"driver {report.driver_version} supports CUDA {report.driver_cuda}, below the image's CUDA {image_cuda}"
        )
    if expect_gpus is not None and len(report.gpus) != expect_gpus:
        report.failures.append(f"{len(report.gpus)} GPU(s) seen, {expect_gpus} expected")
    for gpu in report.gpus:
        where = f"GPU {gpu.index} ({gpu.bus_id})"
        if gpu.persistence_mode != "Enabled":
            report.failures.append(f"{where}: persistence mode {gpu.persistence_mode} (nvidia-smi -pm 1)")
        if gpu.uncorrectable_ecc:
            report.failures.append(
                f"{where}: {gpu.uncorrectable_ecc} uncorrectable ECC error(s) since the driver loaded"
            )
        if gpu.remap_failure:
            report.failures.append(f"{where}: row remapping failed")
        if gpu.ecc_mode not in {"Enabled", "?"}:
            report.notes.append(f"{where}: ECC {gpu.ecc_mode}")


def check_ib(report: Report, require: bool) -> None:
    """ibstat: every InfiniBand port Active and LinkUp (where the node has InfiniBand)."""
    out, why = _run(["ibstat"])
    if out is None:
        (report.failures if require else report.notes).append(f"ibstat: {why}")
        return
    report.ib_ports = parse_ibstat(out)
    if require and not report.ib_ports:
        report.failures.append("ibstat lists no port")
    for port in report.ib_ports:
        if port.link_layer == "InfiniBand" and (port.state != "Active" or port.physical_state != "LinkUp"):
            report.failures.append(f"{port.ca} port {port.port}: {port.state}, {port.physical_state}")


def check_dcgm(report: Report, level: int) -> None:
    """dcgmi diag -r level: every test Pass (Skip and Warn noted)."""
    out, why = _run(["dcgmi", "diag", "-r", str(level)], timeout_s=1800)
    if out is None:
        report.failures.append(f"dcgmi diag: {why}")
        return
    report.dcgm_diag = parse_dcgmi_diag(out)
    if not report.dcgm_diag:
        report.failures.append("dcgmi diag: no test result in its output")
    for test, result in report.dcgm_diag.items():
        if result == "Fail":
            report.failures.append(f"dcgmi diag: {test} failed")
        elif result == "Warn":
            report.notes.append(f"dcgmi diag: {test} warned")


def check_xids(report: Report) -> None:
    """XIDs in the kernel log (dmesg; where it is not readable, noted, not passed silently)."""
    out, why = _run(["dmesg"])
    if out is None:
        report.notes.append(f"kernel log not read for XIDs: {why}")
        return
    report.xids = parse_xids(out)
    if report.xids:
        report.failures.append(f"XID errors in the kernel log: {', '.join(report.xids[:8])}")


def main(argv: list[str] | None = None) -> int:
    """Check this node and print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-cuda", required=True, help="the CUDA version of the image's torch build, e.g. 12.8")
    parser.add_argument("--gpus", type=int, help="GPUs this node must show")
    parser.add_argument("--require-ib", action="store_true", help="fail without InfiniBand ports Active/LinkUp")
    parser.add_argument("--dcgm-diag", type=int, default=0, metavar="LEVEL", help="run dcgmi diag -r LEVEL (1-4)")
    args = parser.parse_args(argv)
    report = Report()
    check_gpus(report, args.image_cuda, args.gpus)
    check_ib(report, args.require_ib)
    if args.dcgm_diag:
        check_dcgm(report, args.dcgm_diag)
    check_xids(report)
    document: dict[str, Any] = {"ok": report.ok, **asdict(report)}
    json.dump(document, sys.stdout, indent=1, allow_nan=False)  # strict, as fleetbench.jsonio (standalone here)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
