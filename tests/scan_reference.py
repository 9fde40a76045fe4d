"""SCAN's numpy reference, shared by tests/test_ops.py (a tuned scan) and
tests/test_postproc.py (a scan whose zero triangle is skipped)."""

from __future__ import annotations

import numpy as np


def scan_ref(x: np.ndarray, n: int) -> np.ndarray:
    """:func:`heronlike.ops.scan`'s ``Y`` (M, n), int64: the exclusive prefix sums of each row
    of ``x`` (M, K) at positions ``0 .. n - 1``, clamped at ``K``."""
    m, k = x.shape
    csum = np.concatenate([np.zeros((m, 1), np.int64), np.cumsum(x, axis=1, dtype=np.int64)], 1)
    return csum[:, np.minimum(np.arange(n), k)]
