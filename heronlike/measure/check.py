"""Output comparison shared by the runner worker and the tune loop's final check.

Kept free of TVM imports so it is cheap to load in any process.
"""

from __future__ import annotations

import numpy as np

__all__ = ["compare", "poison"]

#: seed of the integer poison pattern (fixed: a failing check is reproducible)
POISON_SEED = 0x5EED


def compare(actual: np.ndarray, expected: np.ndarray, rtol: float) -> str | None:
    """Compare a computed output with its expected value.

    Args:
        actual: the array the candidate produced.
        expected: the reference array.
        rtol: relative tolerance. ``0`` (or less) demands exact equality (use it for integer
            outputs, which must be bit-exact); otherwise ``np.allclose(actual, expected,
            rtol=rtol, atol=rtol)`` semantics apply element-wise. NaNs never compare equal.

    Returns:
        ``None`` when the arrays match, else a short one-line message naming the shape or dtype
        mismatch, or the maximum absolute error, the number of mismatching elements and the
        first mismatching index with both values.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape mismatch: got {actual.shape}, expected {expected.shape}"
    if actual.size == 0:
        return None
    if rtol > 0:
        a = actual.astype(np.float64, copy=False)
        e = expected.astype(np.float64, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):
            bad = ~np.isclose(a, e, rtol=rtol, atol=rtol, equal_nan=False)
    else:
        if actual.dtype != expected.dtype and not np.can_cast(
            actual.dtype, expected.dtype, casting="same_kind"
        ):
            return f"dtype mismatch: got {actual.dtype}, expected {expected.dtype}"
        bad = actual != expected
        if np.issubdtype(actual.dtype, np.floating):
            bad |= np.isnan(actual)
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return None
    first = tuple(int(x) for x in np.argwhere(bad)[0])
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    max_err = float(np.nanmax(diff)) if not np.all(np.isnan(diff)) else float("nan")
    return (
        f"{n_bad}/{actual.size} elements differ (rtol={rtol:g}); max abs error {max_err:.6g}; "
        f"first at {first}: got {actual[first].item()!r}, expected {expected[first].item()!r}"
    )


def poison(like: np.ndarray) -> np.ndarray:
    """A fresh array of ``like``'s shape and dtype filled with a poison value, for an output
    buffer before a checked call, so a kernel that never initialises (or only partly writes) its
    output cannot pass the check by inheriting zeros.

    Floats (float16/32/64, bfloat16): NaN everywhere (NaN never compares equal, and any
    accumulation onto it stays NaN). Integers and bools: a fixed pseudo-random pattern over the
    dtype's whole range (seed :data:`POISON_SEED`), so neither zero nor any single constant a
    broken kernel might leave passes.

    Raises:
        TypeError: for a dtype that is neither numeric nor bool (e.g. object arrays).
    """
    like = np.asarray(like)
    dtype = like.dtype
    if dtype.kind == "f" or "float" in dtype.name:  # ml_dtypes' bfloat16 has kind 'V'
        return np.full(like.shape, np.nan, dtype=dtype)
    if dtype.kind in "iub":
        rng = np.random.default_rng(POISON_SEED)
        raw = rng.integers(0, 256, size=like.size * dtype.itemsize, dtype=np.uint8)
        out = raw.view(dtype) if dtype.kind != "b" else (raw[: like.size] & 1).astype(bool)
        return out.reshape(like.shape).copy()
    raise TypeError(f"cannot poison an array of dtype {dtype}")
