"""RPCRunner against a real TVM RPC tracker and server on loopback (the CPU stands in for the
device).

A module fixture starts ``tvm.rpc.tracker.Tracker`` and a ``tvm.rpc.Server`` registered with it
(each in its own subprocess, both on 127.0.0.1), and a 64x64x64 fp32 matmul is built for generic
``llvm`` with LocalBuilder. Failure paths use real failures: a wrong expected file, a missing
artifact, an args file with too few arguments, a device the server lacks, an unknown key, a port
with no tracker, a gcc-built kernel that spins forever, and one that segfaults (on its own
server, since TVM 0.27's RPC server stops serving after a crashed session).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip(
    "tornado", reason="tvm.rpc.tracker needs tornado (add it to the test extra in setup.cfg)"
)

from tvm import rpc, s_tir, te  # noqa: E402
from tvm.rpc.tracker import Tracker  # noqa: E402

from heronlike.errors import HeronlikeError, RunnerSpecError  # noqa: E402
from heronlike.measure import BuildInput, LocalBuilder, RunInput  # noqa: E402
from heronlike.measure.rpc import (  # noqa: E402
    ENV_RUNNER,
    RPCRunner,
    runner_from_spec,
    runner_spec_from_env,
)

N = 64
HOST = "127.0.0.1"
KEY = "heronlike-test"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _wait_registered(tracker_port: int, key: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        conn = rpc.connect_tracker(HOST, tracker_port)
        try:
            servers = conn.summary()["server_info"]
        finally:
            conn.close()
        if any(s.get("key") == f"server:{key}" for s in servers):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no server registered under {key!r} within {timeout_s} s")
        time.sleep(0.05)


def _start_server(tracker_port: int, key: str) -> rpc.Server:
    port = _free_port()
    server = rpc.Server(
        HOST,
        port=port,
        port_end=port + 200,
        key=key,
        tracker_addr=(HOST, tracker_port),
        silent=True,
    )
    _wait_registered(tracker_port, key)
    return server


def _matmul_json() -> str:
    a = te.placeholder((N, N), "float32", name="A")
    b = te.placeholder((N, N), "float32", name="B")
    k = te.reduce_axis((0, N), name="k")
    c = te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
    i, j, kk = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i, j0, kk, j1)
    sch.vectorize(j1)
    return tvm.ir.save_json(sch.mod)


# ----------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rpc")


@pytest.fixture(scope="module")
def tracker():
    port = _free_port()
    trk = Tracker(HOST, port=port, port_end=port + 200, silent=True)
    yield trk
    trk.terminate()


@pytest.fixture(scope="module")
def server(tracker):
    srv = _start_server(tracker.port, KEY)
    yield srv
    srv.terminate()


@pytest.fixture(scope="module")
def artifact(tmp: Path) -> str:
    with LocalBuilder(max_workers=1, timeout_s=60.0, work_dir=tmp / "artifacts") as builder:
        (res,) = builder.build([BuildInput(_matmul_json(), {"kind": "llvm"})])
    assert res.ok, res.error_msg
    return res.artifact_path


@pytest.fixture(scope="module")
def data(tmp: Path) -> dict[str, str]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N)).astype("float32")
    b = rng.standard_normal((N, N)).astype("float32")
    paths = {name: str(tmp / f"{name}.npz") for name in ("args", "expected", "wrong", "short")}
    np.savez(paths["args"], arg0=a, arg1=b, arg2=np.zeros((N, N), "float32"))
    np.savez(paths["expected"], arg2=a @ b)
    np.savez(paths["wrong"], arg2=a @ b + 1.0)
    np.savez(paths["short"], arg0=a, arg1=b)  # one argument too few
    return paths


@pytest.fixture
def runner(tracker, server):
    with RPCRunner(
        HOST, tracker.port, KEY, number=2, repeat=4, min_repeat_ms=1.0, timeout_s=30.0
    ) as r:
        yield r


# ----------------------------------------------------------------------------------------------
# runs


def test_round_mixes_success_and_failures_in_order(runner, artifact, data, tmp) -> None:
    folder = tmp / "folder_artifact"
    folder.mkdir(exist_ok=True)
    shutil.copy(artifact, folder / "kernel.so")
    good = RunInput(artifact, data["args"], data["expected"], rtol=1e-4)
    before = runner.worker_state()
    results = runner.run(
        [
            good,
            RunInput(artifact, data["args"], data["wrong"], rtol=1e-4),
            RunInput(str(tmp / "missing.so"), data["args"], data["expected"], rtol=1e-4),
            RunInput(artifact, data["short"], None),
            RunInput(artifact, data["args"], data["expected"], rtol=1e-4, device="cuda:0"),
            good,
            RunInput(str(folder), data["args"], data["expected"], rtol=1e-4),
            RunInput(artifact, data["args"], None),
        ]
    )
    after = runner.worker_state()
    kinds = [r.error_kind for r in results]
    assert kinds == [None, "wrong_result", "run", "run", "run", None, None, None], [
        r.error_msg for r in results
    ]
    for res in (results[0], results[5], results[6], results[7]):
        assert len(res.latencies_s) == runner.repeat and all(x > 0 for x in res.latencies_s)
        assert res.latency_s == statistics.median(res.latencies_s)
        assert 0 < res.latency_s < 0.1 and res.run_s > 0
    assert results[1].latency_s is None and results[1].latencies_s == ()
    assert "arg2" in results[1].error_msg and "differ" in results[1].error_msg
    assert "missing.so" in results[2].error_msg
    assert "Expected 3 arguments" in results[3].error_msg
    assert "cuda" in results[4].error_msg
    # One session served the whole round (failures on the device did not end it) and was
    # released at the end; the inputs were uploaded once, again to confirm the wrong result
    # with fresh tensors, and once more after the short args file replaced them.
    assert after["sessions"] - before["sessions"] == 1
    assert after["arg_uploads"] - before["arg_uploads"] == 4
    assert after["session"] is None


def test_args_cached_across_a_round(runner, artifact, data) -> None:
    good = RunInput(artifact, data["args"], data["expected"], rtol=1e-4)
    before = runner.worker_state()
    results = runner.run([good] * 3)
    after = runner.worker_state()
    assert all(r.ok for r in results), [r.error_msg for r in results]
    assert after["arg_uploads"] - before["arg_uploads"] == 1
    assert after["sessions"] - before["sessions"] == 1
    assert runner.run([]) == []


def test_wrong_key_is_rpc_quickly(tracker, server, artifact, data) -> None:
    good = RunInput(artifact, data["args"], data["expected"], rtol=1e-4)
    with RPCRunner(HOST, tracker.port, "no-such-key", request_timeout_s=5.0) as r:
        t0 = time.perf_counter()
        results = r.run([good, good, good])
        elapsed = time.perf_counter() - t0
    assert [x.error_kind for x in results] == ["rpc"] * 3
    msg = results[0].error_msg
    assert "no-such-key" in msg and f"{HOST}:{tracker.port}" in msg and KEY in msg
    assert results[1].error_msg.startswith("not attempted")
    assert elapsed < 10


def test_dead_tracker_is_rpc_quickly(artifact, data) -> None:
    port = _free_port()  # nothing listens there
    with RPCRunner(HOST, port, KEY, request_timeout_s=5.0) as r:
        t0 = time.perf_counter()
        results = r.run([RunInput(artifact, data["args"], data["expected"], rtol=1e-4)] * 2)
        elapsed = time.perf_counter() - t0
    assert [x.error_kind for x in results] == ["rpc", "rpc"]
    assert f"{HOST}:{port}" in results[0].error_msg and "reach" in results[0].error_msg
    assert elapsed < 10


def test_hung_kernel_times_out_and_the_device_recovers(
    tracker, server, artifact, data, tmp, gcc_library
):
    hang = gcc_library(tmp, "hang", "volatile int x = 0; for (;;) { x++; }")
    good = RunInput(artifact, data["args"], data["expected"], rtol=1e-4)
    with RPCRunner(
        HOST, tracker.port, KEY, timeout_s=1.5, session_timeout_s=4.0, request_timeout_s=15.0
    ) as r:
        pid = r.worker_state()["pid"]
        t0 = time.perf_counter()
        results = r.run([RunInput(hang, data["args"], None), good])
        elapsed = time.perf_counter() - t0
        assert r.worker_state()["pid"] != pid
    assert [x.error_kind for x in results] == ["run_timeout", None], [x.error_msg for x in results]
    assert results[0].run_s >= 1.5 and "session_timeout_s" in results[0].error_msg
    assert not psutil.pid_exists(pid)
    assert elapsed < 20


def test_segfault_on_device_is_crash(tracker, artifact, data, tmp, gcc_library) -> None:
    key = "heronlike-crash"
    srv = _start_server(tracker.port, key)
    try:
        crash = gcc_library(tmp, "crash", "*(volatile int*)0 = 1;")
        good = RunInput(artifact, data["args"], data["expected"], rtol=1e-4)
        with RPCRunner(HOST, tracker.port, key, request_timeout_s=3.0) as r:
            t0 = time.perf_counter()
            results = r.run([RunInput(crash, data["args"], None), good])
            elapsed = time.perf_counter() - t0
    finally:
        srv.terminate()
    assert [x.error_kind for x in results] == ["crash", "rpc"], [x.error_msg for x in results]
    assert "segfault" in results[0].error_msg
    assert key in results[1].error_msg
    assert elapsed < 15


def test_runner_close(tracker, server) -> None:
    r = RPCRunner(HOST, tracker.port, KEY)
    pid = r.worker_state()["pid"]
    assert psutil.pid_exists(pid) and pid != os.getpid()
    r.close()
    r.close()
    assert not psutil.pid_exists(pid)
    with pytest.raises(RuntimeError):
        r.run([])


def test_constructor_validates() -> None:
    with pytest.raises(ValueError):
        RPCRunner(HOST, 9190, "k", number=0)
    with pytest.raises(ValueError):
        RPCRunner(HOST, 9190, "k", timeout_s=10, session_timeout_s=10)
    with pytest.raises(ValueError):
        RPCRunner(HOST, 70000, "k")
    with pytest.raises(ValueError):
        RPCRunner(HOST, 9190, "bad key")
    r = RPCRunner("::1", 9190, "h100", timeout_s=10)
    try:
        assert r.spec == "rpc://[::1]:9190/h100"
        assert r.session_timeout_s == 70 and r.request_timeout_s == 70
    finally:
        r.close()


# ----------------------------------------------------------------------------------------------
# specs


def test_runner_from_spec_parses() -> None:
    r = runner_from_spec("rpc://127.0.0.1:9190/h100", number=7, repeat=2, timeout_s=5.0)
    try:
        assert isinstance(r, RPCRunner)
        assert (r.tracker_host, r.tracker_port, r.key) == ("127.0.0.1", 9190, "h100")
        assert (r.number, r.repeat, r.timeout_s) == (7, 2, 5.0)
        assert r.spec == "rpc://127.0.0.1:9190/h100"
    finally:
        r.close()
    r = runner_from_spec("  RPC://[::1]:9000/sm_90.a-1 ")
    try:
        assert (r.tracker_host, r.tracker_port, r.key) == ("::1", 9000, "sm_90.a-1")
    finally:
        r.close()


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "127.0.0.1:9190/h100",
        "local",
        "http://127.0.0.1:9190/h100",
        "rpc://127.0.0.1/h100",
        "rpc://127.0.0.1:0/h100",
        "rpc://127.0.0.1:99999/h100",
        "rpc://127.0.0.1:port/h100",
        "rpc://:9190/h100",
        "rpc://127.0.0.1:9190",
        "rpc://127.0.0.1:9190/",
        "rpc://127.0.0.1:9190/a/b",
        "rpc://127.0.0.1:9190/h 100",
        "rpc://127.0.0.1:9190/h100?x=1",
        "rpc://user@127.0.0.1:9190/h100",
    ],
)
def test_runner_from_spec_rejects(spec: str) -> None:
    with pytest.raises(RunnerSpecError, match="rpc://HOST:PORT/KEY") as info:
        runner_from_spec(spec)
    assert isinstance(info.value, HeronlikeError) and isinstance(info.value, ValueError)


def test_runner_spec_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ENV_RUNNER == "HERONLIKE_RUNNER"
    monkeypatch.delenv(ENV_RUNNER, raising=False)
    assert runner_spec_from_env() is None
    monkeypatch.setenv(ENV_RUNNER, "   ")
    assert runner_spec_from_env() is None
    monkeypatch.setenv(ENV_RUNNER, " rpc://127.0.0.1:9190/h100 ")
    assert runner_spec_from_env() == "rpc://127.0.0.1:9190/h100"
