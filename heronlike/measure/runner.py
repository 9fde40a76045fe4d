"""Run built candidates in one persistent, isolated worker process and time them.

Failures are data, never exceptions: a candidate that raises, segfaults, hangs or computes a
wrong result yields a :class:`RunResult` whose ``error_kind`` says so, the worker is replaced if
it died or hung, and the next candidate runs normally.

Measurements are strictly serialised: one candidate at a time, in one worker process whose
thread environment (``TVM_NUM_THREADS``, ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
``MKL_NUM_THREADS``) is fixed when it starts, so a kernel's ``parallel`` loops use exactly
``num_threads`` threads (TVM otherwise halves ``hardware_concurrency()`` on x86).

This module also holds the process plumbing shared with :mod:`heronlike.measure.builder`:
:class:`ManagedWorker` (a :class:`tvm.support.popen_pool.PopenWorker` that does not inherit
stdin, has a parent-side watchdog and is killed at interpreter exit), :func:`thread_env`,
:func:`measure_env`, :func:`short_error` and :func:`run_in_subprocess`.
"""

from __future__ import annotations

import atexit
import math
import os
import select
import statistics
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tvm.support.popen_pool import PopenWorker

from heronlike.measure.kinds import ErrorKind

__all__ = [
    "ALLOCATOR_ENV",
    "WORKER_BLOCKED_MODULES",
    "LocalRunner",
    "Runner",
    "ManagedWorker",
    "RunInput",
    "RunResult",
    "measure_env",
    "run_in_subprocess",
    "short_error",
    "thread_env",
]

#: Extra seconds the parent waits past a call's timeout before it declares the worker hung and
#: kills it. The worker enforces the timeout itself (a watchdog thread); this only matters when
#: the worker cannot answer at all (e.g. a C loop that holds the GIL).
WATCHDOG_GRACE_S = 2.0

#: Modules a worker process cannot import unless it asks for them (``ManagedWorker(blocked=())``).
#: ``tvm_ffi`` imports PyTorch whenever it is installed, only to probe it; no build or kernel run
#: needs it. On an Intel Xeon (Emerald Rapids, 2026-11-29) a worker's ``import tvm`` took 3.5 s
#: with PyTorch 2.13 installed and 1.4 s with it blocked, paid at every tune's start by each
#: builder worker and the runner. A blocked import raises :class:`ModuleNotFoundError`, which
#: ``tvm_ffi`` catches like a missing package.
WORKER_BLOCKED_MODULES: tuple[str, ...] = ("torch",)

#: The child's program: block ``sys.argv[3:]`` (``None`` in ``sys.modules`` makes their import
#: fail), then serve calls like ``python -m tvm.exec.popen_worker <read_fd> <write_fd>``.
_WORKER_MAIN = (
    "import sys\n"
    "sys.modules.update(dict.fromkeys(sys.argv[3:]))\n"
    "del sys.argv[3:]\n"
    "from tvm.exec.popen_worker import main\n"
    "main()\n"
)

_THREAD_VARS = ("TVM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: glibc's allocator policy for every measuring process: blocks up to 32 MiB come from the heap
#: (not a fresh ``mmap`` each time) and the heap is not given back to the OS below 4 GiB free.
#: Without it, code that allocates its output on every call (PyTorch's ``torch.cumsum``, its
#: quantized layers) pays the kernel's page faults on some calls: on a VM (AMD EPYC Zen 5,
#: 2026-11-28) PyTorch's int32 cumsum of 1024 x 1024 x 1024 read 4.0-4.6 ms in 2 of 5 fresh
#: processes and 0.22-0.26 ms in the others; with this policy 0.22-0.27 ms in 5 of 5. Kernels
#: that write a preallocated output (every tuned candidate) are unaffected.
ALLOCATOR_ENV: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
}


# ------------------------------------------------------------------------------------------------
# process plumbing


def thread_env(num_threads: int | None) -> dict[str, str]:
    """The environment variables that pin a measuring process to ``num_threads`` threads.

    ``None`` means ``os.cpu_count()``. Covers the TVM runtime pool, OpenMP (torch), OpenBLAS and
    MKL (numpy). They must be in the environment before the process first runs a kernel (BLAS
    libraries read them when they are loaded), which is why workers get them at spawn time.
    """
    n = int(num_threads) if num_threads is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    return {var: str(n) for var in _THREAD_VARS}


def measure_env(num_threads: int | None) -> dict[str, str]:
    """The whole environment of a measuring process: :func:`thread_env` of ``num_threads`` and
    the allocator policy :data:`ALLOCATOR_ENV`. Every process that times something (the
    runner's worker, :func:`run_in_subprocess`'s baselines) gets it at spawn time, so every
    column of a comparison runs under one policy (glibc reads these variables at start-up only).

    Raises:
        ValueError: ``num_threads`` < 1.
    """
    return thread_env(num_threads) | ALLOCATOR_ENV


def _set_environ(env: Mapping[str, str], setup: Callable[[], None] | None = None) -> None:
    """Worker initializer: (re)apply ``env`` inside the worker before anything runs, then call
    ``setup`` (a target's per-process preparation, e.g. an OS permission request)."""
    os.environ.update(env)
    if setup is not None:
        setup()


def short_error(exc: BaseException, *, max_lines: int = 6, max_chars: int = 1000) -> str:
    """A short one-paragraph description of ``exc``: its type and the last lines of its message.

    TVM errors carry long C++/Python tracebacks; the useful part (``Check failed: ...``) is at
    the end, so the last ``max_lines`` non-empty lines are kept, cut to ``max_chars``.
    """
    lines = [ln.rstrip() for ln in str(exc).splitlines() if ln.strip()]
    text = "\n".join(lines[-max_lines:])
    if len(text) > max_chars:
        text = "..." + text[-max_chars:]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_LIVE_WORKERS: weakref.WeakSet[ManagedWorker] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def _kill_live_workers() -> None:
    with _LIVE_LOCK:
        workers = list(_LIVE_WORKERS)
    for worker in workers:
        try:
            worker.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_kill_live_workers)


class ManagedWorker(PopenWorker):
    """A :class:`PopenWorker` that is safe to use from a tuner.

    Differences from the TVM class:

    * the child gets ``stdin=/dev/null`` (it never steals the terminal) and an explicit
      environment (``env`` merged over the parent's), so thread settings hold from the first
      line the child runs;
    * :meth:`call` adds a parent-side watchdog: if no answer arrives within ``timeout_s +``
      :data:`WATCHDOG_GRACE_S` the child is killed and :class:`TimeoutError` raised, even when the
      child is stuck without releasing the GIL;
    * a child that died between calls is restarted before the next call instead of failing it;
    * the child cannot import the modules in ``blocked`` (default :data:`WORKER_BLOCKED_MODULES`:
      PyTorch, which ``import tvm`` would otherwise load for 2 s); a worker that times PyTorch
      passes ``blocked=()``;
    * every live worker is killed at interpreter exit.

    The child process is started lazily on the first :meth:`call` and restarted lazily after a
    kill; the ``initializer`` runs in every new child before its first task.
    """

    def __init__(
        self,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        *,
        env: Mapping[str, str] | None = None,
        grace_s: float = WATCHDOG_GRACE_S,
        blocked: Sequence[str] = WORKER_BLOCKED_MODULES,
    ) -> None:
        super().__init__(initializer, initargs)
        self._env = dict(env) if env else {}
        self._blocked = tuple(str(name) for name in blocked)
        self._grace_s = float(grace_s)
        with _LIVE_LOCK:
            _LIVE_WORKERS.add(self)

    @property
    def pid(self) -> int | None:
        """The child's process id, or ``None`` when no child is running."""
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        """Start the child (like :meth:`PopenWorker._start`, POSIX only, no stdin, given env)."""
        if self._proc is not None:
            return
        if sys.platform == "win32":  # pragma: no cover - heronlike targets Linux
            super()._start()
            return
        main_read, worker_write = os.pipe()
        worker_read, main_write = os.pipe()
        cmd = [sys.executable, "-c", _WORKER_MAIN, str(worker_read), str(worker_write)]
        cmd += self._blocked
        env = dict(os.environ)
        env.update(self._env)
        try:
            self._proc = subprocess.Popen(
                cmd,
                pass_fds=(worker_read, worker_write),
                stdin=subprocess.DEVNULL,
                stdout=self._stdout,
                stderr=self._stderr,
                env=env,
            )
        finally:
            os.close(worker_read)
            os.close(worker_write)
        self._reader = os.fdopen(main_read, "rb")
        self._writer = os.fdopen(main_write, "wb")

    def start(self) -> None:
        """Start the child now (and run the initializer) if it is not running."""
        if self._proc is not None and not self.is_alive():
            self.kill()
        if self._proc is None:
            self.call(_noop, (), timeout_s=120.0)

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...] = (), *, timeout_s: float) -> Any:
        """Run ``fn(*args)`` in the child and return its result.

        ``fn`` must be picklable by cloudpickle (module-level functions are sent by reference, so
        their module must be importable in the child).

        Raises:
            TimeoutError: ``fn`` ran longer than ``timeout_s`` seconds; the child was killed.
            ChildProcessError: the child died (segfault, ``os._exit``, OOM kill); it was reaped.
            Exception: whatever ``fn`` raised, re-created in the parent with the child's
                formatted traceback as its message (the child stays alive).
        """
        if self._proc is not None and not self.is_alive():
            self.kill()  # died while idle: restart rather than blame this call
        self.send(fn, args, timeout=timeout_s)
        deadline = time.monotonic() + timeout_s + self._grace_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise TimeoutError(f"no answer from worker within {timeout_s + self._grace_s:g} s")
            try:
                ready, _, _ = select.select([self._reader], [], [], remaining)
            except (OSError, ValueError):  # reader closed under us
                self.kill()
                raise ChildProcessError("worker pipe closed") from None
            if ready:
                break
        return self.recv()


def _noop() -> None:
    return None


def _start_quietly(worker: ManagedWorker) -> None:
    """Start ``worker``'s child now if it is not running; a child that cannot start is killed
    and left to the next :meth:`ManagedWorker.call`, which starts it again and reports."""
    try:
        worker.start()
    except Exception:  # noqa: BLE001 - the next call retries and reports
        worker.kill()


def run_in_subprocess(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    num_threads: int | None = None,
    blocked: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Any:
    """Run ``fn(*args)`` in a fresh worker process with the measuring thread environment.

    Unlike the builder's and runner's workers, this one may import PyTorch by default (it
    times the PyTorch baselines), so it starts about 2 s slower when PyTorch is installed; a
    caller that times no PyTorch passes ``blocked=WORKER_BLOCKED_MODULES``.

    The child gets the same environment as :class:`LocalRunner`'s worker
    (:func:`measure_env` of ``num_threads``; ``None`` = ``os.cpu_count()``), so a baseline (numpy,
    torch) timed there is comparable to the candidates. The child is killed afterwards.

    Args:
        fn: a picklable, module-level function (its module must be importable in the child).
        *args: picklable positional arguments.
        timeout_s: wall-clock limit for ``fn`` in seconds (process start-up is not counted).
        num_threads: threads for TVM/OpenMP/BLAS in the child.
        blocked: modules the child cannot import (see :class:`ManagedWorker`).
        env: more environment variables for the child, over the measuring ones (e.g.
            ``ONEDNN_MAX_CPU_ISA``, which oneDNN reads at its first use).

    Returns:
        ``fn``'s return value.

    Raises:
        TimeoutError: ``fn`` did not finish within ``timeout_s``.
        ChildProcessError: the child died (e.g. a segfault).
        Exception: what ``fn`` raised (same type; the message holds the child's traceback).
    """
    child_env = measure_env(num_threads) | dict(env or {})
    worker = ManagedWorker(_set_environ, (child_env,), env=child_env, blocked=blocked)
    try:
        return worker.call(fn, tuple(args), timeout_s=timeout_s)
    finally:
        worker.kill()


# ------------------------------------------------------------------------------------------------
# runner


@dataclass(frozen=True)
class RunInput:
    """One candidate to run.

    Attributes:
        artifact_path: shared library exported by the builder (``BuildResult.artifact_path``).
        args_path: ``.npz`` with arrays ``arg0`` .. ``arg<N-1>`` in the function's call order
            (inputs, and outputs, which the runner replaces by a poison value before the
            checked call: :func:`heronlike.measure.check.poison`). The worker keeps the last
            file loaded (keyed by path, mtime and size), so a round of candidates sharing it
            loads it once.
        expected_path: ``.npz`` with the expected value of each output argument under key
            ``arg<i>`` (``i`` = its call position); ``None`` skips the correctness check.
        rtol: tolerance for the check; ``0`` = exact equality (integer outputs), otherwise
            ``np.allclose`` with ``rtol=atol=rtol`` (see :func:`heronlike.measure.check.compare`).
        device: the device to run on, TVM style: ``"cpu"``, ``"cuda"``, ``"cuda:1"``.
        info: the builder's report for this artifact (:attr:`BuildResult.info`), e.g. the
            launch manifest a runner without TVM needs.
        final: True for the end-of-tune re-measurement of the best candidate
            (:meth:`HardwareMeasurer.finish`); a runner that checks outputs only on some trials
            (a simulator's timing-only mode) must check this one.
        workload: the workload the candidate computes, described for a runner without TVM
            (the bundle workload dict of :func:`heronlike.offline.workload_entry`: kernel
            parameters, reference, input seed, tolerances), so such a runner draws the inputs
            and computes the reference itself; ``None`` when the compute has no such
            description (no einsum or convolution reference). Runners with TVM ignore it.
    """

    artifact_path: str
    args_path: str
    expected_path: str | None
    rtol: float = 0.0
    device: str = "cpu"
    info: Mapping[str, Any] = field(default_factory=dict)
    final: bool = False
    workload: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RunResult:
    """What running one candidate gave.

    Attributes:
        latency_s: median over the ``repeat`` measurements, in seconds; ``None`` on failure.
        latencies_s: each repeat's mean time per call (over ``number`` calls), in seconds; empty
            on failure.
        error_kind: ``None`` on success, else ``"run"`` (load/call raised, e.g. a missing
            artifact or bad args file), ``"run_timeout"`` (exceeded ``timeout_s``; worker
            killed), ``"crash"`` (the worker died, e.g. a segfault) or ``"wrong_result"`` (an
            output differs from the expected value).
        error_msg: a short human-readable message for failures, else ``None``.
        run_s: wall seconds this candidate cost the tuner, including loading, the check, the
            timing, and restarting the worker after a crash or timeout.
        info: anything else the runner measured, JSON-ready (e.g. a simulator's cycle report);
            stored with the trial (:attr:`heronlike.records.TrialRecord.info`).
    """

    latency_s: float | None
    latencies_s: tuple[float, ...]
    error_kind: str | None
    error_msg: str | None
    run_s: float
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the candidate ran, was correct (or unchecked) and was timed."""
        return self.error_kind is None


#: ``on_result`` of :meth:`Runner.run`: (position in the inputs, its result)
OnRunResult = Callable[[int, "RunResult"], None]


class Runner(Protocol):
    """What the tune loop needs from a runner (MetaSchedule's runner seam).

    ``run`` times each built artifact on the device named in its :class:`RunInput`, checks its
    outputs, and returns one :class:`RunResult` per input, in order, never raising for a bad
    candidate. ``number`` and ``repeat`` are the timing settings (calls per measurement,
    measurements per candidate; the latency is the median), which the measurer raises to
    re-measure the best candidate at the end of a tune. ``close`` releases workers.
    ``on_result``, when given, is called with ``(position, RunResult)`` as soon as each input's
    result is known (a runner that measures a whole batch at once calls it at the end), so the
    tune loop commits each trial the moment it finishes.
    """

    number: int
    repeat: int

    def run(
        self, inputs: Sequence[RunInput], on_result: OnRunResult | None = None
    ) -> list[RunResult]: ...

    def close(self) -> None: ...


def parse_device(device: str) -> tuple[str, int]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"cpu"`` -> ``("cpu", 0)``.

    Raises:
        ValueError: for a malformed device string.
    """
    kind, _, index = device.partition(":")
    if not kind or (index and not index.isdigit()):
        raise ValueError(f"device must be 'kind' or 'kind:index', got {device!r}")
    return kind, int(index or 0)


# Worker-side cache: role ("args" / "expected") -> (file key, {name: array}).
_NPZ_CACHE: dict[str, tuple[tuple[str, int, int], dict[str, Any]]] = {}


def _load_npz_cached(path: str, role: str) -> dict[str, Any]:
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
    hit = _NPZ_CACHE.get(role)
    if hit is not None and hit[0] == key:
        return hit[1]
    _NPZ_CACHE.pop(role, None)  # drop the old arrays before loading the new ones
    from heronlike.reference import load_npz

    arrays = load_npz(path)
    _NPZ_CACHE[role] = (key, arrays)
    return arrays


def _ordered_args(arrays: Mapping[str, Any], path: str) -> list[Any]:
    n = len(arrays)
    names = [f"arg{i}" for i in range(n)]
    if sorted(arrays) != sorted(names):
        raise ValueError(f"{path}: expected keys arg0..arg{n - 1}, got {sorted(arrays)}")
    return [arrays[name] for name in names]


# Worker-side: the modules of the batch being timed in rounds (artifact path -> module), kept from
# the first round to the last (:func:`_time_again`).
_LOADED: dict[str, Any] = {}
# Worker-side: one set of argument tensors for the later rounds, shared by every candidate of the
# batch (they all take the same arguments file): (file, device) -> tensors.
_TIMING_TENSORS: dict[tuple[str, str], list[Any]] = {}


def _time(
    mod: Any, dev: Any, tensors: list[Any], number: int, repeat: int, min_repeat_ms: float
) -> tuple[float, ...]:
    """Worker side: ``repeat`` measurements (seconds per call) of ``mod``'s ``main``."""
    timer = mod.time_evaluator(  # TVM takes whole milliseconds
        "main", dev, number=number, repeat=repeat, min_repeat_ms=math.ceil(min_repeat_ms)
    )
    return tuple(float(x) for x in timer(*tensors).results)


def _run_candidate(
    artifact_path: str,
    args_path: str,
    expected_path: str | None,
    rtol: float,
    number: int,
    repeat: int,
    min_repeat_ms: float,
    device: str = "cpu",
    keep: bool = False,
) -> tuple[str | None, str | None, tuple[float, ...]]:
    """Worker side of :meth:`LocalRunner.run`: ``(error_kind, error_msg, latencies_s)``; with
    ``keep``, a candidate that passed stays loaded for :func:`_time_again`."""
    try:
        import tvm

        from heronlike.measure.check import compare, poison

        if os.path.isdir(artifact_path):  # a CUDA build folder (heronlike.measure.cuda)
            artifact_path = os.path.join(artifact_path, "kernel.so")
        if not os.path.exists(artifact_path):
            return ErrorKind.RUN, f"artifact not found: {artifact_path}", ()
        mod = tvm.runtime.load_module(artifact_path)
        func = mod["main"]
        arrays = _ordered_args(_load_npz_cached(args_path, "args"), args_path)
        kind, index = parse_device(device)
        dev = tvm.device(kind, index)
        expected: dict[int, Any] = {}
        if expected_path is not None:
            for name, value in _load_npz_cached(expected_path, "expected").items():
                idx = int(name[3:]) if name.startswith("arg") and name[3:].isdigit() else -1
                if not 0 <= idx < len(arrays):
                    return ErrorKind.RUN, f"{expected_path}: key {name!r} names no argument", ()
                expected[idx] = value
        # outputs start poisoned (NaN / a random bit pattern), never zero: a kernel that skips
        # initialising its accumulator fails the check instead of inheriting zeros
        tensors = [
            tvm.runtime.tensor(poison(a) if i in expected else a, dev) for i, a in enumerate(arrays)
        ]
        func(*tensors)

        def check(when: str) -> str | None:
            for idx in sorted(expected):
                msg = compare(tensors[idx].numpy(), expected[idx], rtol)
                if msg is not None:
                    return f"arg{idx} ({when}): {msg}"
            return None

        if (msg := check("first call")) is not None:
            return ErrorKind.WRONG_RESULT, msg, ()
        results = _time(mod, dev, tensors, number, repeat, min_repeat_ms)
        # the timed calls ran on the checked outputs: a kernel that accumulates across calls
        # (initialises once, or never) is wrong after them
        if (msg := check("after the timed calls")) is not None:
            return ErrorKind.WRONG_RESULT, msg, ()
        if keep:
            _LOADED[artifact_path] = mod
        return None, None, results
    except Exception as exc:  # noqa: BLE001 - failures are data
        return ErrorKind.RUN, short_error(exc), ()


def _time_again(
    artifact_path: str,
    args_path: str,
    number: int,
    repeat: int,
    min_repeat_ms: float,
    device: str = "cpu",
) -> tuple[str | None, str | None, tuple[float, ...]] | None:
    """Worker side of a later round of :meth:`LocalRunner.run`: time a candidate that
    :func:`_run_candidate` checked and kept, on the batch's shared argument tensors;
    ``(error_kind, error_msg, latencies_s)``, or ``None`` when it is not loaded (the worker
    was replaced since)."""
    mod = _LOADED.get(artifact_path)
    if mod is None:
        return None
    try:
        import tvm

        kind, index = parse_device(device)
        dev = tvm.device(kind, index)
        key = (os.path.abspath(args_path), device)
        tensors = _TIMING_TENSORS.get(key)
        if tensors is None:
            _TIMING_TENSORS.clear()
            arrays = _ordered_args(_load_npz_cached(args_path, "args"), args_path)
            tensors = _TIMING_TENSORS[key] = [tvm.runtime.tensor(a, dev) for a in arrays]
        return None, None, _time(mod, dev, tensors, number, repeat, min_repeat_ms)
    except Exception as exc:  # noqa: BLE001 - failures are data
        return ErrorKind.RUN, short_error(exc), ()


def _forget() -> None:
    """Worker side: drop what :func:`_time_again` kept (the batch is done)."""
    _LOADED.clear()
    _TIMING_TENSORS.clear()


def _worker_info() -> dict[str, Any]:
    import tvm

    info: dict[str, Any] = {"pid": os.getpid(), "tvm_num_threads": int(tvm.runtime.num_threads())}
    info.update({var: os.environ.get(var) for var in (*_THREAD_VARS, *ALLOCATOR_ENV)})
    return info


class LocalRunner:
    """Time candidates one at a time in one persistent, isolated worker process.

    With ``interleave``, a batch of several candidates is timed in ``repeat`` **interleaved
    rounds**: the first round loads, checks and times each candidate once (its outputs checked
    before and after); every later round times each of them once more, the order rotated by one
    from round to round, and a candidate's latency is the median of its rounds. A slow spell of
    the machine shorter than the batch (on a virtual machine, a kernel runs up to 2x slower for
    0.1 to 1 s after a process, such as a build, has freed much memory) then falls on one round
    of several candidates instead of on every measurement of one. :meth:`HardwareMeasurer.
    finish_many <heronlike.measure.measurer.HardwareMeasurer.finish_many>` interleaves the
    finalists the same way. It is off by default: the results then reach ``on_result`` only
    when the last round ends, so a ``kill -9`` during the rounds loses every trial of the batch
    instead of the one in flight, and what it buys is small (``benchmarks/measure_rounds.py``,
    docs/results.md "Timing a batch in interleaved rounds", 32 tunes each on Zen 5: the mean of
    the tunes' median trial errors against the harness 3.1 % against 4.4 %, 15 of 512 trials
    timed >= 1.25x slow either way, the fastest trial returned by 24 tunes against 20). TVM
    MetaSchedule's runner and AutoTVM time each candidate's repeats back to back too.

    Args:
        num_threads: threads for the worker's TVM runtime pool (and OpenMP/BLAS);
            ``None`` = ``os.cpu_count()``.
        number: calls averaged into one measurement (``time_evaluator`` ``number``).
        repeat: measurements per candidate; the latency is their median.
        min_repeat_ms: minimum milliseconds per measurement; ``time_evaluator`` raises
            ``number`` for very fast kernels until one measurement lasts this long (rounded up to
            a whole millisecond, as TVM requires).
        timeout_s: wall-clock limit per candidate in seconds (load + check + timing). Past it
            the worker is killed and replaced and the candidate recorded as ``"run_timeout"``.
        setup: a module-level function (it is pickled by name) the worker calls once when it
            starts, before any kernel runs: a target's per-process preparation (AMX asks Linux
            for the tile data state); None for none.
        interleave: time a batch of several candidates in ``repeat`` rounds of one measurement
            each (above); False (the default) times each candidate's ``repeat`` measurements
            back to back and reports it at once.

    The worker starts on :meth:`start` or the first :meth:`run` (about 1.5 s: it imports TVM,
    not charged to any candidate's ``run_s``; it cannot import PyTorch,
    :data:`WORKER_BLOCKED_MODULES`) and is reused.
    Use as a context manager or call :meth:`close`; workers are also killed at interpreter exit.
    """

    def __init__(
        self,
        *,
        num_threads: int | None = None,
        number: int = 3,
        repeat: int = 5,
        min_repeat_ms: float = 10.0,
        timeout_s: float = 30.0,
        setup: Callable[[], None] | None = None,
        interleave: bool = False,
    ) -> None:
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {number}, {repeat}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.num_threads = int(num_threads) if num_threads is not None else (os.cpu_count() or 1)
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.timeout_s = float(timeout_s)
        self.interleave = bool(interleave)
        env = measure_env(self.num_threads)
        self._worker: ManagedWorker | None = ManagedWorker(_set_environ, (env, setup), env=env)
        self._lock = threading.Lock()

    def _require_worker(self) -> ManagedWorker:
        if self._worker is None:
            raise RuntimeError("LocalRunner is closed")
        return self._worker

    def start(self) -> None:
        """Start the worker process now, if it is not running, instead of at the first
        :meth:`run`; the measurer calls it in a thread while the first batch builds, so the
        worker's start-up (importing TVM) overlaps the builds. Never raises: a worker that
        cannot start is started again by :meth:`run`, whose candidate reports the failure.
        """
        with self._lock:
            if self._worker is None:
                return
            _start_quietly(self._worker)  # run() starts it again and reports

    def run(
        self, inputs: Sequence[RunInput], on_result: OnRunResult | None = None
    ) -> list[RunResult]:
        """Run and time each candidate, in order, one at a time; ``on_result(i, result)`` is
        called after each.

        Never raises for a bad candidate: every input gets a :class:`RunResult` (same order).

        Raises:
            RuntimeError: the runner was closed.
        """
        with self._lock:
            worker = self._require_worker()
            if inputs:
                # start-up (importing TVM, ~1 s) is not charged to the first candidate
                _start_quietly(worker)
            if not (self.interleave and len(inputs) > 1 and self.repeat > 1):
                results: list[RunResult] = []
                for i, inp in enumerate(inputs):
                    results.append(self._run_one(worker, inp, self.repeat))
                    if on_result is not None:
                        on_result(i, results[-1])
                return results
            try:
                results = self._run_rounds(worker, inputs)
            finally:
                try:
                    worker.call(_forget, (), timeout_s=self.timeout_s)
                except Exception:  # noqa: BLE001 - a worker that cannot forget is replaced
                    worker.kill()
        if on_result is not None:
            for i, result in enumerate(results):
                on_result(i, result)
        return results

    def _run_rounds(self, worker: ManagedWorker, inputs: Sequence[RunInput]) -> list[RunResult]:
        """Time ``inputs`` in ``repeat`` interleaved rounds (class docstring)."""
        first = [self._run_one(worker, inp, 1, keep=True) for inp in inputs]
        times = [list(r.latencies_s) for r in first]
        run_s = [r.run_s for r in first]
        failed: dict[int, RunResult] = {i: r for i, r in enumerate(first) if not r.ok}
        for rnd in range(1, self.repeat):
            alive = [i for i in range(len(inputs)) if i not in failed]
            if not alive:
                break
            shift = rnd % len(alive)
            for i in alive[shift:] + alive[:shift]:
                inp, t0 = inputs[i], time.perf_counter()
                args = (
                    str(inp.artifact_path),
                    str(inp.args_path),
                    self.number,
                    1,
                    self.min_repeat_ms,
                    str(inp.device),
                )
                outcome = self._call(worker, _time_again, args)
                if outcome is None:  # the worker was replaced since: load and check again
                    again = self._run_one(worker, inp, 1, keep=True)
                    outcome = (again.error_kind, again.error_msg, again.latencies_s)
                kind, msg, lats = outcome
                run_s[i] += time.perf_counter() - t0
                if kind is None and lats:
                    times[i].extend(lats)
                else:
                    failed[i] = self._result(kind or ErrorKind.RUN, msg, (), run_s[i])
        return [
            failed[i] if i in failed else self._result(None, None, tuple(times[i]), run_s[i])
            for i in range(len(inputs))
        ]

    def _run_one(
        self, worker: ManagedWorker, inp: RunInput, repeat: int, *, keep: bool = False
    ) -> RunResult:
        t0 = time.perf_counter()
        args = (
            str(inp.artifact_path),
            str(inp.args_path),
            None if inp.expected_path is None else str(inp.expected_path),
            float(inp.rtol),
            self.number,
            repeat,
            self.min_repeat_ms,
            str(inp.device),
            keep,
        )
        kind, msg, lats = self._call(worker, _run_candidate, args)
        return self._result(kind, msg, lats, time.perf_counter() - t0)

    def _call(self, worker: ManagedWorker, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(*args)`` in the worker; a timeout or a crash becomes ``(kind, message, ())``
        and the worker is replaced."""
        try:
            return worker.call(fn, args, timeout_s=self.timeout_s)
        except TimeoutError:
            out = (ErrorKind.RUN_TIMEOUT, f"exceeded {self.timeout_s:g} s", ())
        except ChildProcessError:
            out = (ErrorKind.CRASH, "worker process died (e.g. segfault) while running", ())
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable input
            return (ErrorKind.RUN, short_error(exc), ())
        # replace the worker now so the next candidate's time is not charged for it
        _start_quietly(worker)
        return out

    @staticmethod
    def _result(
        kind: str | None, msg: str | None, lats: Sequence[float], run_s: float
    ) -> RunResult:
        ok = kind is None and bool(lats)
        return RunResult(
            latency_s=statistics.median(lats) if ok else None,
            latencies_s=tuple(lats) if kind is None else (),
            error_kind=kind,
            error_msg=msg,
            run_s=run_s,
        )

    def worker_info(self) -> dict[str, Any]:
        """Diagnostics from inside the worker: its ``pid``, ``tvm_num_threads``
        (``tvm.runtime.num_threads()``) and the thread environment variables it sees."""
        with self._lock:
            return self._require_worker().call(_worker_info, (), timeout_s=60.0)

    def close(self) -> None:
        """Kill the worker. Idempotent; the runner cannot be used afterwards."""
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
