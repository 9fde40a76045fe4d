"""Vendor-library baselines, timed under the same thread settings as heronlike's runner.

* numpy: ``float32`` matmul through its BLAS (OpenBLAS in the wheels). numpy has no int8
  GEMM, and its integer matmul bypasses BLAS (about 100× slower), so float32 is the fair
  "numpy" figure for an int8 GEMM.
* PyTorch: ``torch._int_mm`` (int8 × int8 → int32 through oneDNN, which uses VNNI); optional,
  installed with ``pip install heronlike[bench]``.

Each function runs in a fresh worker process (:func:`heronlike.measure.run_in_subprocess`)
with ``num_threads`` threads and returns the median latency in seconds over ``repeat`` timed
calls after warm-up, or ``None`` with a reason when the library is missing or rejects the shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .measure import run_in_subprocess


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeat):
        number = 1
        while True:  # at least ~10 ms per sample, like the runner's min_repeat_ms
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            dt = time.perf_counter() - t0
            if dt >= 0.01 or number >= 1 << 16:
                break
            number *= 4
        samples.append(dt / number)
    samples.sort()
    return samples[len(samples) // 2]


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
            _numpy_worker, batch, M, N, K, repeat, timeout_s=300, num_threads=threads
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
