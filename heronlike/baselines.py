"""Vendor-library baselines, timed under the same thread settings as heronlike's runner.

* numpy: ``float32`` matmul through its BLAS (OpenBLAS in the wheels). numpy has no int8
  GEMM, and its integer matmul bypasses BLAS (about 100× slower), so float32 is the fair
  "numpy" figure for an int8 GEMM.
* PyTorch: its fastest int8 path (:func:`torch_op`: pre-packed quantized ``Linear`` /
  ``Conv``, ``torch._int_mm``); optional, installed with ``pip install heronlike[bench]``.

Each function runs in a fresh worker process (:func:`heronlike.measure.run_in_subprocess`)
with ``num_threads`` threads and returns the median latency in seconds over ``repeat`` timed
calls after warm-up, or ``None`` with a reason when the library is missing or rejects the shape.

:func:`torch_op` and :func:`numpy_op` cover every operator of :mod:`heronlike.ops` by name and
shape parameters (the benchmark suite and ``heronlike tune`` use them): PyTorch's quantized
(u8 × s8) products and convolutions or ``torch._int_mm``, numpy im2col + BLAS matmul for
convolutions.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from .measure import run_in_subprocess
from .measure.runner import WORKER_BLOCKED_MODULES

#: oneDNN's name of the AVX512-VNNI instruction set (``ONEDNN_MAX_CPU_ISA``): the cap under
#: which PyTorch runs the instructions ``dlboost`` kernels use, on a CPU with AMX too
VNNI_ONEDNN_ISA = "AVX512_CORE_VNNI"


def _calls_per_sample(fn: Callable[[], object], min_sample_s: float) -> int:
    """Calls of ``fn`` that take at least ``min_sample_s`` seconds together (1, 4, 16, ...,
    at most 65536), like the runner's ``min_repeat_ms``."""
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - t0 >= min_sample_s or number >= 1 << 16:
            return number
        number *= 4


def interleaved_samples(
    fns: Sequence[Callable[[], object]],
    repeat: int,
    min_sample_s: float = 0.01,
    before_turn: Callable[[], object] | None = None,
) -> list[list[float]]:
    """Timing samples (seconds per call) of each of ``fns``, taken in turn.

    Each function gets 3 warm-up calls and a calls-per-sample count so that one sample lasts at
    least ``min_sample_s`` seconds. Then ``repeat`` times, every function takes one sample in
    turn (the order rotated by one each time), each sample after one untimed call, so a sample
    does not pay for the cache state the previous function left. On a shared machine a slow
    spell of a few seconds (seen on cloud VMs with nothing else running in the guest) then falls
    on every function alike instead of on all the samples of one.

    Args:
        fns: callables taking no argument (a kernel bound to its arguments).
        repeat: samples per function (>= 1).
        min_sample_s: the shortest sample in seconds.
        before_turn: called, untimed, before each of the ``repeat`` turns: a caller that
            records the machine's state there (``benchmarks/suite.py``: the core-to-core round
            trip) can tell which turn each sample was taken in.

    Returns:
        One list of ``repeat`` samples in seconds per call for each of ``fns``, in their order.

    Raises:
        ValueError: ``repeat`` < 1.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    numbers = []
    for fn in fns:
        for _ in range(3):
            fn()
        numbers.append(_calls_per_sample(fn, min_sample_s))
    samples: list[list[float]] = [[] for _ in fns]
    for r in range(repeat):
        if before_turn is not None:
            before_turn()
        for j in [(r + i) % len(fns) for i in range(len(fns))]:
            fn, number = fns[j], numbers[j]
            fn()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[j].append((time.perf_counter() - t0) / number)
    return samples


def interleaved_median_times(
    fns: Sequence[Callable[[], object]], repeat: int, min_sample_s: float = 0.01
) -> list[float]:
    """The median of each function's :func:`interleaved_samples`, in seconds per call (the
    lower middle sample for an even ``repeat``).

    Raises:
        ValueError: ``repeat`` < 1.
    """
    return [statistics.median_low(s) for s in interleaved_samples(fns, repeat, min_sample_s)]


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds per call of ``fn`` (:func:`interleaved_median_times` of one function)."""
    return interleaved_median_times([fn], repeat)[0]


def _numpy_worker(batch: int, M: int, N: int, K: int, repeat: int) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, M, K), dtype=np.float32)
    b = rng.standard_normal((batch, K, N), dtype=np.float32)
    return _median_time(lambda: np.matmul(a, b), repeat)


def _torch_worker(batch: int, M: int, N: int, K: int, repeat: int, threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (K, N), dtype=torch.int8)
    out = torch._int_mm(a, b)
    ref = a.to(torch.int64) @ b.to(torch.int64)
    if not torch.equal(out.to(torch.int64), ref):
        raise ValueError("torch._int_mm is not exact on this CPU")

    def run() -> None:
        for _ in range(batch):
            torch._int_mm(a, b)

    return _median_time(run, repeat)


def numpy_matmul(
    M: int, N: int, K: int, *, batch: int = 1, threads: int, repeat: int = 15
) -> tuple[float | None, str]:
    """Median seconds of a float32 ``(batch, M, K) @ (batch, K, N)`` in numpy, and a note."""
    try:
        t = run_in_subprocess(
            _numpy_worker,  # numpy only: a child without PyTorch starts 2 s sooner
            batch,
            M,
            N,
            K,
            repeat,
            timeout_s=300,
            num_threads=threads,
            blocked=WORKER_BLOCKED_MODULES,
        )
        return t, "numpy float32 matmul (BLAS)"
    except Exception as err:  # pragma: no cover - reported, not raised
        return None, f"numpy failed: {err}"


def torch_int_mm(
    M: int, N: int, K: int, *, batch: int = 1, threads: int, repeat: int = 15
) -> tuple[float | None, str]:
    """Median seconds of ``torch._int_mm`` (s8 × s8 → s32) over the batch, and a note."""
    try:
        t = run_in_subprocess(
            _torch_worker, batch, M, N, K, repeat, threads, timeout_s=300, num_threads=threads
        )
        return t, "torch._int_mm (oneDNN int8)"
    except ModuleNotFoundError:
        return None, "PyTorch is not installed (pip install 'heronlike[bench]')"
    except Exception as err:
        return None, f"torch._int_mm failed: {str(err).splitlines()[-1] if str(err) else err}"


# ------------------------------------------------------------------------------------------------
# every operator of heronlike.ops: PyTorch and numpy, by operator name and shape parameters
#
# ``params`` are the keyword arguments of the ``heronlike.ops`` builder (without ``dtype``), e.g.
# ``{"N": 1, "H": 56, "W": 56, "CI": 64, "CO": 64, "KH": 3, "KW": 3, "stride": 1, "pad": 1,
# "dilation": 1}`` for ``c2d``. The baselines compute the same logical operator; their memory
# layouts are each library's fastest (channels-last for PyTorch's quantized convolutions).

#: operators whose baselines are a matrix product: name -> (batch, M, N, K) from the parameters
_MATMUL_SHAPES: dict[str, Callable[[dict[str, int]], tuple[int, int, int, int]]] = {
    "gemm": lambda p: (1, p["M"], p["N"], p["K"]),
    "bmm": lambda p: (p["B"], p["M"], p["N"], p["K"]),
    "gemv": lambda p: (1, 1, p["M"], p["K"]),  # y = x A^T: a 1-row matrix product
}

_CONV_OPS = ("c1d", "c2d", "c3d", "dil", "group_c2d", "depthwise_c2d", "t2d")


def _conv_geometry(op: str, p: dict[str, int]) -> dict[str, object]:
    """Spatial sizes, kernel sizes, channels and groups of a convolution operator."""
    if op == "c1d":
        spatial, kernel = (p["W"],), (p["KW"],)
    elif op == "c3d":
        spatial, kernel = (p["D"], p["H"], p["W"]), (p["KD"], p["KH"], p["KW"])
    else:
        spatial, kernel = (p["H"], p["W"]), (p["KH"], p["KW"])
    if op == "depthwise_c2d":
        ci = co = groups = p["C"]
    else:
        ci, co, groups = p["CI"], p["CO"], p.get("groups", 1)
    return {
        "N": p["N"],
        "spatial": spatial,
        "kernel": kernel,
        "CI": ci,
        "CO": co,
        "groups": groups,
        "stride": p.get("stride", 1),
        "pad": p.get("pad", 0),
        "dilation": p.get("dilation", 2 if op == "dil" else 1),
        "output_padding": p.get("output_padding", 0),
        "transposed": op == "t2d",
    }


def _numpy_conv(x, w, stride: int, pad: int, dilation: int, groups: int):  # noqa: ANN001, ANN202 - numpy arrays
    """Channels-last convolution by im2col + matmul: x (N, *S, CI), w (CO, *K, CI/groups)."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    nd = x.ndim - 2
    kernel = w.shape[1:-1]
    xp = np.pad(x, [(0, 0)] + [(pad, pad)] * nd + [(0, 0)])
    span = [(k - 1) * dilation + 1 for k in kernel]
    win = sliding_window_view(xp, span, axis=tuple(range(1, nd + 1)))  # (N, *S', CI, *span)
    win = win[(slice(None),) + (slice(None, None, stride),) * nd + (slice(None),)
              + (slice(None, None, dilation),) * nd]  # fmt: skip
    win = np.moveaxis(win, nd + 1, -1)  # (N, *O, *K, CI)
    out_sp = win.shape[1 : 1 + nd]
    rows = int(np.prod(win.shape[: 1 + nd]))
    ksize = int(np.prod(kernel))
    cig = x.shape[-1] // groups
    cols = win.reshape(rows, ksize, groups, cig).transpose(2, 0, 1, 3).reshape(groups, rows, -1)
    wt = w.reshape(groups, w.shape[0] // groups, ksize * cig)
    out = np.matmul(cols, wt.transpose(0, 2, 1))  # (G, rows, CO/G)
    return out.transpose(1, 0, 2).reshape((x.shape[0], *out_sp, w.shape[0]))


def _numpy_conv_worker(g: dict[str, object], repeat: int) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    n, spatial, kernel = g["N"], g["spatial"], g["kernel"]
    ci, co, groups = g["CI"], g["CO"], g["groups"]
    x = rng.standard_normal((n, *spatial, ci), dtype=np.float32)
    w = rng.standard_normal((co, *kernel, ci // groups), dtype=np.float32)
    stride, pad, dil = g["stride"], g["pad"], g["dilation"]
    if not g["transposed"]:
        return _median_time(lambda: _numpy_conv(x, w, stride, pad, dil, groups), repeat)
    # transposed convolution = zero-insert by stride, pad by dil*(K-1)-pad (+ output_padding on
    # the high side), then a stride-1 convolution with the flipped kernel
    nd = len(spatial)
    lo = [dil * (k - 1) - pad for k in kernel]
    wf = np.ascontiguousarray(w[(slice(None),) + (slice(None, None, -1),) * nd])

    def run():  # noqa: ANN202
        up = np.zeros((n, *[(s - 1) * stride + 1 for s in spatial], ci), np.float32)
        up[(slice(None),) + (slice(None, None, stride),) * nd] = x
        widths = [(0, 0)] + [(max(a, 0), max(a, 0) + g["output_padding"]) for a in lo] + [(0, 0)]
        up = np.pad(up, widths)
        crop = [max(-a, 0) for a in lo]
        if any(crop):
            up = up[(slice(None),) + tuple(slice(c, up.shape[1 + i] - c) for i, c in
                                           enumerate(crop))]  # fmt: skip
        return _numpy_conv(up, wf, 1, 0, dil, groups)

    return _median_time(run, repeat)


def torch_paths(
    op: str, params: dict[str, int], threads: int
) -> tuple[dict[str, Callable[[], object]], list[str]]:
    """Every int8 CPU path PyTorch has for operator ``op`` of :mod:`heronlike.ops`, built and
    ready to call on ``threads`` threads: ``(name -> callable, failures)`` (a path that could
    not be built is a failure naming why). Call the callables under ``torch.no_grad()``.

    Matrix products (GEMM, GEMV as a 1-row product, BMM as one call per batch):
    ``torch.ao.nn.quantized.Linear`` (u8 x s8, weight pre-packed at ``set_weight_bias``,
    requantised u8 output) under the ``onednn`` and ``x86`` engines, and ``torch._int_mm``
    (s8 x s8 -> s32 exact; its weight cannot be pre-packed), also into preallocated outputs
    (``out=``, as every tuned kernel writes its output). Convolutions:
    ``torch.ao.nn.quantized.Conv{1,2,3}d`` / ``ConvTranspose2d`` (u8 x s8, pre-packed weight,
    channels-last) under both engines. SCAN: ``torch.cumsum`` over int32 rows, allocating and
    with ``out=``.

    Raises:
        ModuleNotFoundError: PyTorch is not installed.
    """
    import warnings

    import torch

    warnings.filterwarnings("ignore")  # quantized tensor creation is deprecated (still works)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    engines = [e for e in ("onednn", "x86") if e in torch.backends.quantized.supported_engines]
    made: dict[str, Callable[[], object]] = {}
    failed: list[str] = []

    def attempt(name: str, make) -> None:  # noqa: ANN001
        try:
            made[name] = make()
        except Exception as err:  # noqa: BLE001 - the other paths still count
            failed.append(f"{name} failed ({str(err).splitlines()[0][:80] if str(err) else err})")

    if op in _MATMUL_SHAPES:
        import torch.ao.nn.quantized as nnq

        batch, M, N, K = _MATMUL_SHAPES[op](params)

        def linear(engine: str):  # noqa: ANN202
            def make():  # noqa: ANN202
                torch.backends.quantized.engine = engine
                mods = []
                for _ in range(batch):
                    mod = nnq.Linear(K, N, bias_=False)
                    w = torch.randn(N, K) * 0.1
                    mod.set_weight_bias(torch.quantize_per_tensor(w, 0.01, 0, torch.qint8), None)
                    mod.scale, mod.zero_point = 1.0, 0
                    mods.append(mod)
                qx = torch.quantize_per_tensor(torch.rand(M, K), 1 / 255, 0, torch.quint8)
                return lambda: [m(qx) for m in mods]

            return make

        for engine in engines:
            attempt(f"torch.ao.nn.quantized.Linear ({engine} engine, pre-packed, u8 x s8)",
                    linear(engine))  # fmt: skip

        def int_mm(out: bool):  # noqa: ANN202
            def make():  # noqa: ANN202
                a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
                b = torch.randint(-128, 128, (K, N), dtype=torch.int8)
                if not torch.equal(torch._int_mm(a, b).to(torch.int64), a.long() @ b.long()):
                    raise ValueError("torch._int_mm is not exact on this CPU")
                if not out:
                    return lambda: [torch._int_mm(a, b) for _ in range(batch)]
                outs = [torch.empty(M, N, dtype=torch.int32) for _ in range(batch)]
                return lambda: [torch._int_mm(a, b, out=c) for c in outs]

            return make

        for out in (False, True):
            attempt(f"torch._int_mm (oneDNN, s8 x s8 -> s32, not pre-packed{', out=' * out})",
                    int_mm(out))  # fmt: skip
    elif op == "scan":

        def cumsum(out: bool):  # noqa: ANN202
            def make():  # noqa: ANN202
                x = torch.randint(0, 256, (params["M"], params["K"]), dtype=torch.int32)
                if not out:
                    return lambda: torch.cumsum(x, dim=1)
                y = torch.empty_like(x)
                return lambda: torch.cumsum(x, dim=1, out=y)

            return make

        for out in (False, True):
            attempt(f"torch.cumsum (int32{', out=' * out})", cumsum(out))
    else:
        import torch.ao.nn.quantized as nnq

        g = _conv_geometry(op, params)
        nd = len(g["spatial"])
        ci, co, groups = g["CI"], g["CO"], g["groups"]
        kw = dict(stride=g["stride"], padding=g["pad"], dilation=g["dilation"], groups=groups)

        def conv(engine: str):  # noqa: ANN202
            def make():  # noqa: ANN202
                torch.backends.quantized.engine = engine
                if g["transposed"]:
                    if nd != 2:
                        raise ValueError("only 2-D transposed convolution")
                    mod = nnq.ConvTranspose2d(
                        ci, co, g["kernel"], output_padding=g["output_padding"], **kw
                    )
                    wshape = (ci, co // groups, *g["kernel"])
                else:
                    mod = {1: nnq.Conv1d, 2: nnq.Conv2d, 3: nnq.Conv3d}[nd](
                        ci, co, g["kernel"], **kw
                    )
                    wshape = (co, ci // groups, *g["kernel"])
                w = torch.quantize_per_tensor(torch.randn(wshape) * 0.1, 0.01, 0, torch.qint8)
                mod.set_weight_bias(w, None)
                mod.scale, mod.zero_point = 1.0, 0
                x = torch.rand(g["N"], ci, *g["spatial"])
                qx = torch.quantize_per_tensor(x, 1 / 255, 0, torch.quint8)
                fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(nd)
                if fmt is not None:
                    qx = qx.contiguous(memory_format=fmt)
                return lambda: mod(qx)

            return make

        for engine in engines:
            name = f"torch.ao.nn.quantized.{'ConvTranspose2d' if g['transposed'] else 'Conv'}"
            name += f"{'' if g['transposed'] else f'{nd}d'} ({engine} engine, pre-packed, u8 x s8)"
            attempt(name, conv(engine))
    return made, failed


def torch_path_samples(
    op: str,
    params: dict[str, int],
    samples: int,
    threads: int,
    before_sample: Callable[[str], object] | None = None,
) -> tuple[dict[str, list[float]], list[str]]:
    """Every int8 CPU path PyTorch has for operator ``op`` (:func:`torch_paths`) timed on
    ``threads`` threads, one path after the other: ``(name -> samples in seconds per call,
    failures)``, ``samples`` samples of at least 10 ms each per path
    (:func:`interleaved_samples` of that path alone: 3 warm-up calls, one untimed call before
    each sample). ``before_sample(name)``, if given, is called, untimed, before each sample of
    path ``name`` (the benchmark suite measures the core-to-core round trip there). A path that
    raises is a failure naming why; the others still count. Run it in a worker process.

    Raises:
        ModuleNotFoundError: PyTorch is not installed.
    """
    import torch

    made, failed = torch_paths(op, params, threads)
    timed: dict[str, list[float]] = {}
    for name, fn in made.items():
        hook = (lambda name=name: before_sample(name)) if before_sample is not None else None
        try:
            with torch.no_grad():
                (timed[name],) = interleaved_samples([fn], samples, before_turn=hook)
        except Exception as err:  # noqa: BLE001 - the other paths still count
            failed.append(f"{name} failed ({str(err).splitlines()[0][:80] if str(err) else err})")
    return timed, failed


def torch_paths_worker(
    op: str, params: dict[str, int], samples: int, threads: int
) -> tuple[float, str]:
    """Every int8 CPU path PyTorch has for operator ``op`` (:func:`torch_paths`), each timed
    (median of ``samples`` calls of at least 10 ms, :func:`torch_path_samples`) on ``threads``
    threads; the fastest is returned as ``(seconds, implementation text naming the others and
    their times)``. Run it in a worker process (:func:`torch_op`, the benchmark suite's
    harness).

    Raises:
        RuntimeError: no path ran (each failure named).
        ModuleNotFoundError: PyTorch is not installed.
    """
    timed, failed = torch_path_samples(op, params, samples, threads)
    medians = {name: statistics.median_low(got) for name, got in timed.items()}
    return fastest_path(medians, failed, op)


def fastest_path(timed: dict[str, float], failed: list[str], op: str) -> tuple[float, str]:
    """``(seconds, text)`` of the fastest of PyTorch's timed paths ``timed`` (name -> seconds),
    the text naming it, then the others' times and the ``failed`` paths.

    Raises:
        RuntimeError: nothing was timed.
    """
    if not timed:
        raise RuntimeError("; ".join(failed) or f"no PyTorch path for {op!r}")
    best = min(timed, key=timed.__getitem__)
    others = [f"{n} {t * 1e3:.3g} ms" for n, t in timed.items() if n != best] + failed
    return timed[best], best + (f" [also: {'; '.join(others)}]" if others else "")


def torch_op(
    op: str, params: dict[str, int], *, threads: int, repeat: int = 15, isa: str | None = None
) -> tuple[float | None, str]:
    """Median seconds of PyTorch's fastest int8 CPU path for operator ``op`` of
    :mod:`heronlike.ops` (:func:`torch_paths_worker` in a worker process), and what ran.

    The paths (the second value names the fastest and the others' times):

    * ``gemm``, ``gemv`` (a 1-row product), ``bmm`` (one call per batch):
      ``torch.ao.nn.quantized.Linear`` (u8 × s8, pre-packed, ``onednn`` and ``x86`` engines)
      and ``torch._int_mm`` (s8 × s8 → s32 through oneDNN; on a CPU without VNNI a slow
      fallback, so the quantized Linear is PyTorch's real int8 GEMM there);
    * convolutions (``c1d``, ``c2d``, ``c3d``, ``dil``, ``group_c2d``, ``depthwise_c2d``,
      ``t2d``): ``torch.ao.nn.quantized.Conv{1,2,3}d`` / ``ConvTranspose2d``, u8 × s8 with a
      requantized u8 output (PyTorch has no int8 → int32 CPU convolution), channels-last;
    * ``scan``: ``torch.cumsum`` over int32 rows of ``(M, K)``.

    ``isa`` caps oneDNN's instruction set in the worker (``ONEDNN_MAX_CPU_ISA``, e.g.
    :data:`VNNI_ONEDNN_ISA`: on a CPU with AMX, oneDNN otherwise runs AMX tile kernels, which
    a VNNI kernel is not comparable with); ``None`` leaves oneDNN its default (the process's
    own ``ONEDNN_MAX_CPU_ISA`` if set).

    Returns ``(None, reason)`` when PyTorch is missing or rejects the operator or shape.
    """
    try:
        if op not in _MATMUL_SHAPES and op not in _CONV_OPS and op != "scan":
            return None, f"no PyTorch baseline for {op!r}"
        return run_in_subprocess(
            torch_paths_worker,
            op,
            params,
            repeat,
            threads,
            timeout_s=300,
            num_threads=threads,
            env={"ONEDNN_MAX_CPU_ISA": isa} if isa else None,
        )
    except ModuleNotFoundError:
        return None, "PyTorch is not installed (pip install 'heronlike[bench]')"
    except Exception as err:
        return None, f"PyTorch failed: {str(err).splitlines()[-1] if str(err) else err}"


def _numpy_scan_worker(p: dict[str, int], repeat: int) -> float:
    import numpy as np

    x = np.random.default_rng(0).standard_normal((p["M"], p["K"]), dtype=np.float32)
    return _median_time(lambda: np.cumsum(x, axis=1), repeat)


def numpy_op(
    op: str, params: dict[str, int], *, threads: int, repeat: int = 15
) -> tuple[float | None, str]:
    """Median seconds of numpy computing operator ``op`` of :mod:`heronlike.ops` in float32.

    ``gemm``/``bmm``/``gemv``: ``np.matmul`` (BLAS); convolutions: zero padding, im2col
    (``sliding_window_view`` copied into a matrix) and one BLAS ``matmul`` per group, all
    inside the timed call (``t2d``: zero-insertion by the stride, then the same with the flipped
    kernel); ``scan``: ``np.cumsum``. Returns ``(None, reason)`` on failure.
    """
    try:
        if op in _MATMUL_SHAPES:
            batch, M, N, K = _MATMUL_SHAPES[op](params)
            return numpy_matmul(M, N, K, batch=batch, threads=threads, repeat=repeat)
        if op in _CONV_OPS:
            g = _conv_geometry(op, params)
            t = run_in_subprocess(
                _numpy_conv_worker,
                g,
                repeat,
                timeout_s=300,
                num_threads=threads,
                blocked=WORKER_BLOCKED_MODULES,
            )
            return t, "numpy float32 im2col + matmul (BLAS)"
        if op == "scan":
            t = run_in_subprocess(
                _numpy_scan_worker,
                params,
                repeat,
                timeout_s=300,
                num_threads=threads,
                blocked=WORKER_BLOCKED_MODULES,
            )
            return t, "numpy float32 cumsum"
        return None, f"no numpy baseline for {op!r}"
    except Exception as err:
        return None, f"numpy failed: {str(err).splitlines()[-1] if str(err) else err}"
