"""Standard computes, as lists of ``te.Tensor`` (inputs first, then the output).

One convention for every target: row-major tensors; the second operand of a matrix product
is stored *output-feature major* (``W[n, k]``, as a ``torch.nn.Linear`` weight), so
``C = X @ W.T``. ``dtype`` names the input precision:

=============  ==================  ==================  ========
``dtype``      first operand       second operand      output
=============  ==================  ==================  ========
``"int8"``     uint8 (activation)  int8 (weight)       int32
``"float16"``  float16             float16             float32
``"float32"``  float32             float32             float32
=============  ==================  ==================  ========

``int8`` is unsigned × signed because that is what AVX512-VNNI (``vpdpbusd``) and VTA compute.

Raises (all functions):
    InvalidComputeError: for a non-positive extent.
    UnsupportedDtypeError: for a ``dtype`` not in the table.
"""

from __future__ import annotations

from tvm import te

from .errors import InvalidComputeError, UnsupportedDtypeError

DTYPES: dict[str, tuple[str, str, str]] = {
    "int8": ("uint8", "int8", "int32"),
    "float16": ("float16", "float16", "float32"),
    "float32": ("float32", "float32", "float32"),
}


def dtypes(dtype: str) -> tuple[str, str, str]:
    """``(first operand, second operand, output)`` dtypes for ``dtype``."""
    try:
        return DTYPES[dtype]
    except KeyError:
        raise UnsupportedDtypeError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}") from None


def _check(**extents: int) -> None:
    for name, value in extents.items():
        if not isinstance(value, int) or value <= 0:
            raise InvalidComputeError(f"extent {name}={value!r} must be a positive integer")


def gemm(M: int, N: int, K: int, dtype: str = "int8") -> list[te.Tensor]:
    """Matrix multiply ``C[m, n] = sum_k X[m, k] * W[n, k]``.

    Returns ``[X (M, K), W (N, K), C (M, N)]``; FLOP count ``2·M·N·K``.
    """
    _check(M=M, N=N, K=K)
    a, b, c = dtypes(dtype)
    X = te.placeholder((M, K), a, name="X")
    W = te.placeholder((N, K), b, name="W")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute(
        (M, N), lambda i, j: te.sum(X[i, k].astype(c) * W[j, k].astype(c), axis=k), name="C"
    )
    return [X, W, C]


def bmm(B: int, M: int, N: int, K: int, dtype: str = "int8") -> list[te.Tensor]:
    """Batched matrix multiply ``C[b, m, n] = sum_k X[b, m, k] * W[b, n, k]``.

    Returns ``[X (B, M, K), W (B, N, K), C (B, M, N)]``; FLOP count ``2·B·M·N·K``.
    """
    _check(B=B, M=M, N=N, K=K)
    a, b_, c = dtypes(dtype)
    X = te.placeholder((B, M, K), a, name="X")
    W = te.placeholder((B, N, K), b_, name="W")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute(
        (B, M, N),
        lambda b, i, j: te.sum(X[b, i, k].astype(c) * W[b, j, k].astype(c), axis=k),
        name="C",
    )
    return [X, W, C]


def gemv(M: int, K: int, dtype: str = "int8") -> list[te.Tensor]:
    """Matrix-vector product ``y[m] = sum_k A[m, k] * x[k]``.

    Returns ``[x (K,), A (M, K), y (M,)]``: the vector is the first (activation) operand and
    the matrix the second (weight) operand, following the dtype table. FLOP count ``2·M·K``.
    """
    _check(M=M, K=K)
    a, b, c = dtypes(dtype)
    x = te.placeholder((K,), a, name="x")
    A = te.placeholder((M, K), b, name="A")
    k = te.reduce_axis((0, K), name="k")
    y = te.compute((M,), lambda i: te.sum(x[k].astype(c) * A[i, k].astype(c), axis=k), name="y")
    return [x, A, y]


#: operator name -> (builder, names of its shape arguments), for the CLI and benchmarks
OPERATORS = {
    "gemm": (gemm, ("M", "N", "K")),
    "bmm": (bmm, ("B", "M", "N", "K")),
    "gemv": (gemv, ("M", "K")),
}
