"""A library build measured through a TVM RPC tracker and two ``rpc_server`` processes on
loopback (the CPU stands in for two device machines), as docs/library.md describes for N
machines: the test starts the tracker and the servers (``python -m tvm.exec.rpc_tracker`` /
``rpc_server``, each in its own process group), builds a tiny library with two lanes through
``rpc://127.0.0.1:PORT/KEY`` and stops them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("tornado", reason="tvm.rpc.tracker needs tornado")

from tvm import rpc  # noqa: E402

from heronlike.library import build, load  # noqa: E402

HOST = "127.0.0.1"
KEY = "heronlike-lib"
OPS = [
    {"op": "gemm", "shape": {"M": 8, "N": 32, "K": 32}, "dtype": "int8", "occurrences": 2},
    {
        "op": "conv2d",
        "shape": {"N": 1, "H": 6, "W": 6, "CI": 8, "CO": 16, "KH": 3, "KW": 3, "pad": 1},
        "dtype": "int8",
    },
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _servers(port: int) -> list[dict]:
    conn = rpc.connect_tracker(HOST, port)
    try:
        return conn.summary()["server_info"]
    finally:
        conn.close()


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the serving child dies with it
        env={**os.environ, "TVM_NUM_THREADS": "1"},
    )


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def tracker_with_two_servers() -> Iterator[int]:
    port = _free_port()
    procs = [
        _start(
            [
                "tvm.exec.rpc_tracker",
                "--host",
                HOST,
                "--port",
                str(port),
                "--port-end",
                str(port + 1),
                "--silent",
            ]
        )  # fmt: skip
    ]
    try:
        deadline = time.monotonic() + 60
        while True:  # the tracker answers
            try:
                _servers(port)
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        for _ in range(2):
            sp = _free_port()
            procs.append(
                _start(
                    [
                        "tvm.exec.rpc_server",
                        "--tracker",
                        f"{HOST}:{port}",
                        "--key",
                        KEY,
                        "--host",
                        HOST,
                        "--port",
                        str(sp),
                        "--port-end",
                        str(sp + 50),
                        "--silent",
                    ]
                )  # fmt: skip
            )
        while sum(s.get("key") == f"server:{KEY}" for s in _servers(port)) < 2:
            if time.monotonic() > deadline:
                raise TimeoutError("the two servers did not register")
            time.sleep(0.2)
        yield port
    finally:
        for p in reversed(procs):
            _stop(p)


def test_library_build_through_tracker_and_two_servers(
    tracker_with_two_servers: int, tmp_path: Path
) -> None:
    port = tracker_with_two_servers
    lanes: set[int] = set()
    res = build(
        OPS,
        "llvm",
        trials=8,
        batch_size=4,
        out_dir=tmp_path / "lib",
        records=tmp_path / "records.sqlite",
        runner=f"rpc://{HOST}:{port}/{KEY}",
        parallel=2,
        progress=lambda r: lanes.add(r.lane),
    )
    assert res.schedule is not None and res.schedule.trials_done == 8
    assert lanes == {0, 1}  # both lanes measured, each through its own RPC session
    assert res.checked is True and not res.missing
    assert all(k["latency_s"] > 0 for k in res.manifest["kernels"])
    lib = load(tmp_path / "lib")
    a = np.arange(8 * 32, dtype=np.uint8).reshape(8, 32)
    b = (np.arange(32 * 32) % 255 - 127).astype(np.int8).reshape(32, 32)
    want = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
    assert np.array_equal(lib.gemm(a, b), want)
    # the servers are still registered and free after the build released its sessions
    assert sum(s.get("key") == f"server:{KEY}" for s in _servers(port)) == 2
