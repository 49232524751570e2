"""NCCL's chosen transport from its INFO lines (the layout NCCL 2.x prints), and the socket-fallback warning."""

from __future__ import annotations

from pathlib import Path

from fleetbench.train.nccl_transport import infiniband_present, parse, read_logs, warning

IB_RUN = """\
gpu-a01:2201:2201 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.11<0>
gpu-a01:2201:2201 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
gpu-a01:2201:2201 [0] NCCL INFO cudaDriverVersion 12080
NCCL version 2.21.5+cuda12.4
gpu-a01:2201:2270 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.11<0>
gpu-a01:2201:2270 [0] NCCL INFO Using network IB
gpu-a01:2202:2271 [1] NCCL INFO Using network IB
gpu-a01:2201:2270 [0] NCCL INFO comm 0x8e3c2d0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
"""

SOCKET_RUN = """\
gpu-a02:3310:3310 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.12<0>
gpu-a02:3310:3377 [0] NCCL INFO Failed to open libibverbs.so[.1]
gpu-a02:3310:3377 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.12<0>
gpu-a02:3310:3377 [0] NCCL INFO Using network Socket
"""


def test_infiniband_chosen() -> None:
    transport = parse(IB_RUN)
    assert transport.networks == ["IB"] and transport.devices == {"IB": ["mlx5_0:1/IB", "mlx5_1:1/IB"]}
    assert not transport.fell_back_to_sockets
    assert warning(transport, has_infiniband=True) is None


def test_socket_fallback_warns_only_where_infiniband_exists() -> None:
    transport = parse(SOCKET_RUN)
    assert transport.networks == ["Socket"] and transport.devices == {"Socket": ["eth0:10.0.0.12<0>"]}
    said = warning(transport, has_infiniband=True)
    assert said is not None and "fell back to TCP sockets (eth0:10.0.0.12<0>)" in said
    assert warning(transport, has_infiniband=False) is None  # an Ethernet-only node: sockets are its network


def test_mixed_nodes_and_files(tmp_path: Path) -> None:
    (tmp_path / "nccl.gpu-a01.2201.log").write_text(IB_RUN)
    (tmp_path / "nccl.gpu-a02.3310.log").write_text(SOCKET_RUN)
    transport = read_logs(tmp_path)
    assert transport.networks == ["IB", "Socket"] and transport.fell_back_to_sockets
    assert parse("no NCCL here").networks == []


def test_infiniband_devices(tmp_path: Path) -> None:
    assert not infiniband_present(tmp_path / "absent")
    (tmp_path / "ib").mkdir()
    assert not infiniband_present(tmp_path / "ib")
    (tmp_path / "ib" / "uverbs0").write_text("")
    assert infiniband_present(tmp_path / "ib")


def test_the_launcher_keeps_the_transport_in_the_run_folder(tmp_path: Path) -> None:
    import json

    from fleetbench.train.launch import note_nccl_transport

    scratch, run_dir = tmp_path / "scratch", tmp_path / "run"
    scratch.mkdir()
    run_dir.mkdir()
    note_nccl_transport(scratch, run_dir)  # no NCCL log (gloo, or NCCL_DEBUG not INFO): nothing written
    assert not (run_dir / "nccl-transport.json").exists()
    (scratch / "nccl.gpu-a02.3310.log").write_text(SOCKET_RUN)
    note_nccl_transport(scratch, run_dir)
    kept = json.loads((run_dir / "nccl-transport.json").read_text())
    assert kept["networks"] == ["Socket"] and kept["infiniband"] == infiniband_present()
    assert (kept["warning"] is not None) == kept["infiniband"]
