"""Exact reference arithmetic in numpy alone (no TVM), so that kernels can be checked on a
machine that runs them without a compiler stack: a GPU machine with numpy and CuPy checking a
CUDA kernel library (:func:`heronlike.library.check_library`)."""

from __future__ import annotations

import numpy as np

__all__ = ["exact_einsum"]


def exact_einsum(spec: str, a: np.ndarray, b: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """``np.einsum(spec, a, b)`` as the hardware computes it, in ``out_dtype``.

    Float outputs: the sum in float64, rounded once to ``out_dtype``. Integer outputs: the
    exact integer sum wrapped to ``out_dtype``'s width (two's complement, as an int32
    accumulator wraps; e.g. int16 × int16 summed over K = 2^16 can pass 2^31), never a float
    cast of an out-of-range value. The fast path sums in float64 (BLAS) when every partial sum
    is below 2^53 and so exact (``K · max|a| · max|b| < 2^53``), the slow one in int64.

    Raises:
        ValueError: a malformed ``spec`` (as ``np.einsum``).
    """
    if out_dtype.kind not in "iub":
        out = np.einsum(spec, a.astype(np.float64), b.astype(np.float64), optimize=True)
        return out.astype(out_dtype)
    lhs, _, out_letters = spec.partition("->")
    la, lb = lhs.split(",")
    sizes = dict(zip(la, a.shape, strict=True)) | dict(zip(lb, b.shape, strict=True))
    k = 1
    for letter in set(la + lb) - set(out_letters):
        k *= sizes[letter]
    peak = (
        k
        * int(np.abs(a.astype(np.int64)).max(initial=0))
        * int(np.abs(b.astype(np.int64)).max(initial=0))
    )
    if peak < 2**53:
        exact = np.einsum(spec, a.astype(np.float64), b.astype(np.float64), optimize=True)
        exact = exact.astype(np.int64)  # integral and in range: exact
    else:
        exact = np.einsum(spec, a.astype(np.int64), b.astype(np.int64), optimize=True)
    return exact.astype(out_dtype)  # keeps the low bits: the accumulator's wrap-around
