"""Real builds and runs through the measurement seam (no mocks).

A 64x64x64 fp32 matmul is scheduled (split + parallel + vectorize), built in the worker pool
and run in the isolated runner worker. Failure paths use real failures: garbage JSON, an
unbound variable, a tiny build timeout, gcc-built libraries that segfault or spin forever, and
functions that kill or hang their worker.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import time
from pathlib import Path

import cloudpickle
import numpy as np
import psutil
import pytest

tvm = pytest.importorskip("tvm")

from tvm import s_tir, te  # noqa: E402

from heronlike.measure import (  # noqa: E402
    BuildInput,
    LocalBuilder,
    LocalRunner,
    RunInput,
    compare,
    run_in_subprocess,
)
from heronlike.measure.runner import (  # noqa: E402
    ALLOCATOR_ENV,
    ManagedWorker,
    measure_env,
    thread_env,
)
from heronlike.measure.runner import WORKER_BLOCKED_MODULES as NO_TORCH  # noqa: E402

# Functions below are sent to worker processes; ship them by value (the test module itself is
# not importable in a child under --import-mode=importlib).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

N = 64
NUM_THREADS = min(2, os.cpu_count() or 1)


def _target() -> dict:
    return {
        "kind": "llvm",
        "mcpu": tvm.target.codegen.llvm_get_system_cpu(),
        "num-cores": NUM_THREADS,
    }


def _matmul_json() -> str:
    a = te.placeholder((N, N), "float32", name="A")
    b = te.placeholder((N, N), "float32", name="B")
    k = te.reduce_axis((0, N), name="k")
    c = te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, kk, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return tvm.ir.save_json(sch.mod)


def _unbound_var_json() -> str:
    n = tvm.tirx.Var("n", "int32")
    a = te.placeholder((16,), "float32", name="A")
    c = te.compute((16,), lambda i: a[i] + tvm.tirx.Cast("float32", n), name="C")
    return tvm.ir.save_json(tvm.IRModule({"main": te.create_prim_func([a, c])}))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("measure")


@pytest.fixture(scope="module")
def builder(tmp: Path):
    with LocalBuilder(max_workers=2, timeout_s=60.0, work_dir=tmp / "artifacts") as b:
        yield b


@pytest.fixture(scope="module")
def runner():
    with LocalRunner(num_threads=NUM_THREADS, number=3, repeat=5, min_repeat_ms=5.0) as r:
        yield r


@pytest.fixture(scope="module")
def matmul_artifact(builder: LocalBuilder) -> str:
    (res,) = builder.build([BuildInput(_matmul_json(), _target())])
    assert res.error_kind is None, res.error_msg
    return res.artifact_path


@pytest.fixture(scope="module")
def matmul_data(tmp: Path) -> tuple[str, str, str]:
    """(args.npz, expected.npz, wrong_expected.npz) for the matmul."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N)).astype("float32")
    b = rng.standard_normal((N, N)).astype("float32")
    args = tmp / "args.npz"
    np.savez(args, arg0=a, arg1=b, arg2=np.zeros((N, N), "float32"))
    expected = tmp / "expected.npz"
    np.savez(expected, arg2=a @ b)
    wrong = tmp / "wrong.npz"
    np.savez(wrong, arg2=a @ b + 1.0)
    return str(args), str(expected), str(wrong)


# ----------------------------------------------------------------------------------------------
# check.compare


def test_compare_exact_and_tolerant() -> None:
    x = np.arange(12, dtype="int32").reshape(3, 4)
    assert compare(x, x.copy(), 0.0) is None
    y = x.copy()
    y[1, 2] += 1
    msg = compare(y, x, 0.0)
    assert msg is not None and "1/12" in msg and "(1, 2)" in msg
    assert "shape" in compare(x, x.ravel(), 0.0)
    f = np.ones(5, "float32")
    assert compare(f * (1 + 1e-6), f, 1e-4) is None
    assert compare(f * 1.1, f, 1e-4) is not None
    g = f.copy()
    g[3] = np.nan
    assert compare(g, f, 1e-4) is not None and compare(g, f, 0.0) is not None


# ----------------------------------------------------------------------------------------------
# builder


def test_build_batch_mixes_success_and_failures(builder: LocalBuilder, tmp: Path) -> None:
    good = BuildInput(_matmul_json(), _target())
    batch = [good, BuildInput("garbage {", _target()), BuildInput(_unbound_var_json(), _target())]
    batch.append(good)
    pids_before = [w.pid for w in builder._workers]
    results = builder.build(batch)
    assert [r.error_kind for r in results] == [None, "build", "build", None]
    assert all(r.build_s > 0 for r in results)
    assert "not passed in as API arguments" in results[2].error_msg
    assert all(len(r.error_msg) < 1200 for r in results[1:3])
    assert results[0].artifact_path != results[3].artifact_path
    for r in (results[0], results[3]):
        assert r.artifact_path.startswith(str(tmp / "artifacts")) and os.path.isfile(
            r.artifact_path
        )
        mod = tvm.runtime.load_module(r.artifact_path)
        a = np.random.default_rng(1).standard_normal((N, N)).astype("float32")
        args = [tvm.runtime.tensor(x) for x in (a, a, np.zeros((N, N), "float32"))]
        mod["main"](*args)
        np.testing.assert_allclose(args[2].numpy(), a @ a, rtol=1e-4, atol=1e-4)
    # The pool is persistent: a failing candidate does not cost a worker.
    builder.build([good])
    pids_after = [w.pid for w in builder._workers]
    assert None not in pids_after
    assert all(p is None or p in pids_after for p in pids_before)


def test_build_timeout_then_recovers(tmp: Path) -> None:
    # compile (~40 ms) + export_library through gcc (~100 ms) is well over 20 ms.
    with LocalBuilder(max_workers=1, timeout_s=0.02, work_dir=tmp / "timeouts") as b:
        (res,) = b.build([BuildInput(_matmul_json(), _target())])
        assert res.error_kind == "build_timeout" and res.artifact_path is None
        b.timeout_s = 60.0
        (res,) = b.build([BuildInput(_matmul_json(), _target())])
        assert res.error_kind is None and os.path.isfile(res.artifact_path)


def test_builder_close_removes_own_dir_and_workers() -> None:
    b = LocalBuilder(max_workers=1)
    (res,) = b.build([BuildInput(_matmul_json(), _target())])
    assert res.ok
    pid = b._workers[0].pid
    work_dir = b.work_dir
    b.close()
    b.close()  # idempotent
    assert not os.path.exists(work_dir)
    assert not psutil.pid_exists(pid)
    with pytest.raises(RuntimeError):
        b.build([])


# ----------------------------------------------------------------------------------------------
# runner


def test_run_times_correct_candidate(runner: LocalRunner, matmul_artifact, matmul_data) -> None:
    args, expected, _ = matmul_data
    (res,) = runner.run([RunInput(matmul_artifact, args, expected, rtol=1e-4)])
    assert res.error_kind is None, res.error_msg
    assert len(res.latencies_s) == runner.repeat and all(x > 0 for x in res.latencies_s)
    assert res.latency_s == statistics.median(res.latencies_s)
    assert 0 < res.latency_s < 0.1 and res.run_s > 0
    (unchecked,) = runner.run([RunInput(matmul_artifact, args, None)])
    assert unchecked.ok


def test_run_failures_are_data(runner: LocalRunner, matmul_artifact, matmul_data, tmp) -> None:
    args, expected, wrong = matmul_data
    results = runner.run(
        [
            RunInput(matmul_artifact, args, wrong, rtol=1e-4),
            RunInput(str(tmp / "missing.so"), args, expected, rtol=1e-4),
            RunInput(matmul_artifact, str(tmp / "missing.npz"), None),
            RunInput(matmul_artifact, args, expected, rtol=1e-4),
        ]
    )
    assert [r.error_kind for r in results] == ["wrong_result", "run", "run", None]
    assert "arg2" in results[0].error_msg and "differ" in results[0].error_msg
    assert "missing.so" in results[1].error_msg
    assert results[0].latency_s is None and results[0].latencies_s == ()


def test_run_crash_and_hang_replace_worker(
    runner, matmul_artifact, matmul_data, tmp, gcc_library
) -> None:
    args, expected, _ = matmul_data
    crash = gcc_library(tmp, "crash", "*(volatile int*)0 = 1;")
    hang = gcc_library(tmp, "hang", "volatile int x = 0; for (;;) { x++; }")
    good = RunInput(matmul_artifact, args, expected, rtol=1e-4)
    pid = runner.worker_info()["pid"]
    old_timeout = runner.timeout_s
    runner.timeout_s = 1.0
    try:
        t0 = time.perf_counter()
        results = runner.run([RunInput(crash, args, None), good, RunInput(hang, args, None), good])
        elapsed = time.perf_counter() - t0
    finally:
        runner.timeout_s = old_timeout
    assert [r.error_kind for r in results] == ["crash", None, "run_timeout", None]
    assert results[2].run_s >= 1.0 and elapsed < 30
    assert runner.worker_info()["pid"] != pid
    assert not psutil.pid_exists(pid)


def _logging_kernel(gcc_library, tmp: Path, name: str, log: Path) -> str:
    """A kernel that appends ``name`` to ``log`` on every call."""
    body = (
        "extern void* fopen(const char*, const char*); extern int fputc(int, void*); "
        f'extern int fclose(void*); void* f = fopen("{log}", "a"); fputc({ord(name)}, f); '
        "fclose(f);"
    )
    return gcc_library(tmp, f"log_{name}_{log.stem}", body)


def _runs(text: str) -> str:
    """``text`` with every run of one letter collapsed: "AAABBA" -> "ABA"."""
    return "".join(c for i, c in enumerate(text) if i == 0 or text[i - 1] != c)


@pytest.mark.parametrize("interleave", [True, False])
def test_batch_is_timed_in_interleaved_rounds(
    interleave: bool, matmul_data, tmp, gcc_library
) -> None:
    args, _, _ = matmul_data
    log = tmp / f"calls_{interleave}.txt"
    a, b = (_logging_kernel(gcc_library, tmp, n, log) for n in "AB")
    with LocalRunner(
        num_threads=1, number=1, repeat=3, min_repeat_ms=1.0, interleave=interleave
    ) as r:
        seen: list[int] = []
        results = r.run(
            [RunInput(a, args, None), RunInput(b, args, None)], lambda i, _: seen.append(i)
        )
    assert seen == [0, 1] and all(res.ok and len(res.latencies_s) == 3 for res in results)
    # rounds A B | B A | A B (the order rotated) against A A A | B B B
    assert _runs(log.read_text()) == ("ABAB" if interleave else "AB")


def test_crash_in_a_later_round_fails_only_that_candidate(matmul_data, tmp, gcc_library) -> None:
    args, _, _ = matmul_data
    log = tmp / "calls_crash.txt"
    writer = _logging_kernel(gcc_library, tmp, "A", log)  # its first round creates the log
    crash = gcc_library(
        tmp,
        "crash_later",
        f'extern int access(const char*, int); if (access("{log}", 0) == 0) *(volatile int*)0 = 1;',
    )
    with LocalRunner(num_threads=1, number=1, repeat=3, min_repeat_ms=1.0, interleave=True) as r:
        pid = r.worker_info()["pid"]
        results = r.run([RunInput(crash, args, None), RunInput(writer, args, None)])
        assert r.worker_info()["pid"] != pid  # replaced after the crash
    assert results[0].error_kind == "crash" and results[0].latencies_s == ()
    # the survivor is loaded again in the new worker and keeps all its rounds
    assert results[1].ok and len(results[1].latencies_s) == 3


def test_runner_worker_uses_num_threads(runner: LocalRunner) -> None:
    info = runner.worker_info()
    assert info["TVM_NUM_THREADS"] == str(NUM_THREADS)
    assert info["OPENBLAS_NUM_THREADS"] == str(NUM_THREADS)
    assert info["tvm_num_threads"] == NUM_THREADS
    assert info["pid"] != os.getpid()


def test_runner_close_kills_worker() -> None:
    r = LocalRunner(num_threads=1)
    pid = r.worker_info()["pid"]
    assert psutil.pid_exists(pid)
    r.close()
    r.close()
    assert not psutil.pid_exists(pid)
    with pytest.raises(RuntimeError):
        r.run([])


def test_the_runner_starts_while_the_first_batch_builds(tmp: Path) -> None:
    # the runner's worker imports TVM while the builder's workers start and build, instead of
    # after them: the builder waits to see it started (it never would if it started at run)
    from heronlike import ops
    from heronlike.session import TuningSession

    runner = LocalRunner(num_threads=1)
    seen: list[int | None] = []

    class WatchingBuilder(LocalBuilder):
        def build(self, inputs):  # type: ignore[no-untyped-def]
            deadline = time.monotonic() + 30
            while runner._worker.pid is None and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append(runner._worker.pid)
            return super().build(inputs)

    session = TuningSession(
        ops.gemm(16, 16, 16, dtype="int8"),
        "llvm",
        trials=2,
        batch_size=2,
        records=tmp / "r.sqlite",
        runner=runner,
        builder=WatchingBuilder(max_workers=1),
    )
    try:
        while session.round():
            pass
        result = session.finish()
    finally:
        session.close()
    assert seen and seen[0] is not None
    assert result.trials_run == 2 and result.correct


# ----------------------------------------------------------------------------------------------
# run_in_subprocess


def _thread_report() -> tuple[str | None, str | None, int, str]:
    import tvm as tvm_child

    return (
        os.environ.get("TVM_NUM_THREADS"),
        os.environ.get("OMP_NUM_THREADS"),
        int(tvm_child.runtime.num_threads()),
        os.readlink("/proc/self/fd/0"),
    )


def _torch_import_report() -> tuple[str, bool]:
    """What ``import torch`` does in this process, and whether TVM is imported."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return type(exc).__name__, "tvm" in sys.modules
    return "imported", "tvm" in sys.modules


def test_workers_block_torch_except_the_baselines_process() -> None:
    # The builder's and runner's workers never import PyTorch (tvm_ffi would load it for 2 s
    # at every worker start); run_in_subprocess times PyTorch baselines, so it may.
    pytest.importorskip("torch")
    worker = ManagedWorker()
    try:
        assert worker.call(_torch_import_report, timeout_s=60) == ("ModuleNotFoundError", True)
    finally:
        worker.kill()
    assert run_in_subprocess(_torch_import_report, timeout_s=60) == ("imported", True)


def _mmapped_blocks_for(nbytes: int) -> int:
    """How many new ``mmap``-ed blocks glibc's ``malloc(nbytes)`` makes in this process
    (``mallinfo2().hblks`` before and during the allocation)."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")]  # fmt: skip

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    before = libc.mallinfo2().hblks
    block = libc.malloc(ctypes.c_size_t(nbytes))
    during = libc.mallinfo2().hblks
    libc.free(ctypes.c_void_p(block))
    return during - before


def _policy_report(nbytes: int) -> tuple[dict[str, str], int]:
    """The allocator variables of this process's initial environment, and the mmapped blocks
    of one ``malloc(nbytes)``."""
    raw = Path("/proc/self/environ").read_bytes().split(b"\0")
    env = dict(item.decode().split("=", 1) for item in raw if b"=" in item)
    return {k: env[k] for k in ALLOCATOR_ENV if k in env}, _mmapped_blocks_for(nbytes)


def _segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def _spin_holding_gil() -> int:
    return sum(range(10**13))  # a C loop that never releases the GIL


def _raise() -> None:
    raise ValueError("bad baseline")


def test_run_in_subprocess_thread_env_and_isolation() -> None:
    tvm_threads, omp, runtime_threads, stdin = run_in_subprocess(
        _thread_report, timeout_s=60, num_threads=NUM_THREADS
    )
    assert tvm_threads == omp == str(NUM_THREADS)
    assert runtime_threads == NUM_THREADS
    assert stdin == "/dev/null"
    assert run_in_subprocess(_sleep, 0.0, timeout_s=30) == "woke"


def _environ_of(name: str) -> str | None:
    return os.environ.get(name)


def test_run_in_subprocess_adds_the_callers_environment() -> None:
    # e.g. torch_op(isa=...) caps oneDNN in the child only; the measuring variables stay
    env = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"}
    before = dict(os.environ)
    got = [
        run_in_subprocess(_environ_of, name, timeout_s=60, num_threads=1, env=env, blocked=NO_TORCH)
        for name in ("ONEDNN_MAX_CPU_ISA", "TVM_NUM_THREADS")
    ]
    assert got == ["AVX512_CORE_VNNI", "1"]
    assert dict(os.environ) == before  # this process's environment is left alone


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_measuring_processes_share_the_allocator_policy() -> None:
    # glibc mmaps a large block (threshold 128 KiB at start, growing as mmapped blocks are
    # freed); the measuring environment's policy takes blocks below 32 MiB from the heap, so an
    # output allocated per call is not faulted in again on every call. glibc reads the
    # variables at exec time only, so they must be in the child's initial environment.
    at_exec, mmapped = run_in_subprocess(_policy_report, 24 << 20, timeout_s=60, num_threads=1)
    assert at_exec == ALLOCATOR_ENV
    assert mmapped == 0
    assert measure_env(2) == thread_env(2) | ALLOCATOR_ENV


def test_run_in_subprocess_failures() -> None:
    # children without PyTorch (2 s less start-up each): these failures are the process's
    with pytest.raises(ChildProcessError):
        run_in_subprocess(_segfault, timeout_s=30, blocked=NO_TORCH)
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError):
        run_in_subprocess(_sleep, 60.0, timeout_s=0.5, blocked=NO_TORCH)
    assert time.perf_counter() - t0 < 20
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError):  # the parent-side watchdog fires
        run_in_subprocess(_spin_holding_gil, timeout_s=0.5, blocked=NO_TORCH)
    assert time.perf_counter() - t0 < 20
    with pytest.raises(ValueError, match="bad baseline"):
        run_in_subprocess(_raise, timeout_s=30, blocked=NO_TORCH)
    assert run_in_subprocess(_sleep, 0.0, timeout_s=30, blocked=NO_TORCH) == "woke"
