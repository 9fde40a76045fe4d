"""Standard computes, as lists of ``te.Tensor`` (inputs first, then the output).

One convention for every target: row-major tensors; the second operand of a matrix product
is stored *output-feature major* (``W[n, k]``, as a ``torch.nn.Linear`` weight), so
``C = X @ W.T``. ``dtype`` names the input precision:

=====================  ==================  ==================  ========
``dtype``              first operand       second operand      output
=====================  ==================  ==================  ========
``"int8"``             uint8 (activation)  int8 (weight)       int32
``"int8-int8"``        int8                int8                int32
``"float16"``          float16             float16             float32
``"float16-float16"``  float16             float16             float16
``"bfloat16"``         bfloat16            bfloat16            float32
``"float32"``          float32             float32             float32
=====================  ==================  ==================  ========

``int8`` is unsigned × signed because that is what AVX512-VNNI (``vpdpbusd``) computes; a
target whose int8 is signed × signed (TensorCore) maps the name to ``int8-int8`` through its
``dtype_names`` (:func:`dtypes` with ``target``). ``float16-float16`` accumulates in float16.

Raises (all functions):
    InvalidComputeError: for a non-positive extent.
    UnsupportedDtypeError: for a ``dtype`` not in the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvm import te, tirx

from .errors import InvalidComputeError, UnsupportedDtypeError

DTYPES: dict[str, tuple[str, str, str]] = {
    "int8": ("uint8", "int8", "int32"),
    "int8-int8": ("int8", "int8", "int32"),
    "float16": ("float16", "float16", "float32"),
    "float16-float16": ("float16", "float16", "float16"),
    "bfloat16": ("bfloat16", "bfloat16", "float32"),
    "float32": ("float32", "float32", "float32"),
}


def target_dtype(dtype: str, target: Any = None) -> str:
    """The ``DTYPES`` name ``dtype`` means on ``target`` (a target string, dict or object):
    e.g. ``"int8"`` is ``"int8-int8"`` on TensorCore. Unchanged without a target."""
    if target is None:
        return dtype
    from .target import get_target

    return dict(getattr(get_target(target), "dtype_names", {})).get(dtype, dtype)


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


# -- convolutions ---------------------------------------------------------------------------------
#
# Layout convention (every target): activations channels-last (N, [D,] [H,] W, C), weights
# output-feature major (CO, [KD,] [KH,] KW, CI) like GEMM's ``W[n, k]``, output channels-last.
# Spatial zero padding is a separate stage ``Xp`` (``tirx.if_then_else``); its cost is inside
# the kernel. The reduction order is (kernel window..., CI) with CI innermost, which is what
# the DL Boost intrinsic tiles (n = CO, k = CI).


def _out_size(name: str, size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    out = (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    if out <= 0:
        raise InvalidComputeError(
            f"output extent {name}={out} <= 0: input {size}, kernel {kernel}, stride {stride}, "
            f"pad {pad}, dilation {dilation}"
        )
    return out


def _check_conv(stride: int, pad: int, dilation: int) -> None:
    _check(stride=stride, dilation=dilation)
    if not isinstance(pad, int) or pad < 0:
        raise InvalidComputeError(f"pad={pad!r} must be a non-negative integer")


def _pad_input(X: te.Tensor, pad: int, spatial: int) -> te.Tensor:
    """Zero-pad the ``spatial`` dimensions after the batch of a channels-last tensor."""
    if pad == 0:
        return X
    shape = [int(s) for s in X.shape]
    padded = [shape[0]] + [s + 2 * pad for s in shape[1 : 1 + spatial]] + shape[1 + spatial :]

    def body(*idx: Any) -> Any:
        inside = [tirx.all(i >= pad, i < s + pad) for i, s in zip(idx[1 : 1 + spatial], shape[1:])]
        src = [idx[0]] + [i - pad for i in idx[1 : 1 + spatial]] + list(idx[1 + spatial :])
        return tirx.if_then_else(tirx.all(*inside), X[tuple(src)], tirx.const(0, X.dtype))

    return te.compute(padded, body, name="Xp")


def _conv_nd(
    N: int,
    spatial: Sequence[int],
    CI: int,
    CO: int,
    kernel: Sequence[int],
    stride: int,
    pad: int,
    dilation: int,
    dtype: str,
) -> list[te.Tensor]:
    """Channels-last ``len(spatial)``-D convolution shared by :func:`c1d`, :func:`c2d`,
    :func:`c3d` and :func:`dil`."""
    names = "DHW"[3 - len(spatial) :]
    _check(N=N, CI=CI, CO=CO, **{n: s for n, s in zip(names, spatial)})
    _check(**{f"K{n}": k for n, k in zip(names, kernel)})
    _check_conv(stride, pad, dilation)
    a, b, c = dtypes(dtype)
    out = [
        _out_size(f"{n}O", s, k, stride, pad, dilation) for n, s, k in zip(names, spatial, kernel)
    ]
    X = te.placeholder((N, *spatial, CI), a, name="X")
    Wt = te.placeholder((CO, *kernel, CI), b, name="W")
    Xp = _pad_input(X, pad, len(spatial))
    red = [te.reduce_axis((0, k), name=f"r{n.lower()}") for n, k in zip(names, kernel)]
    ci = te.reduce_axis((0, CI), name="ci")

    def body(n: Any, *rest: Any) -> Any:
        pos, co = rest[:-1], rest[-1]
        x_idx = [p * stride + r * dilation for p, r in zip(pos, red)]
        return te.sum(Xp[(n, *x_idx, ci)].astype(c) * Wt[(co, *red, ci)].astype(c), axis=[*red, ci])

    Y = te.compute((N, *out, CO), body, name="Y")
    return [X, Wt, Y]


def c1d(
    N: int,
    W: int,
    CI: int,
    CO: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """1-D convolution ``Y[n, w, co] = sum_{rw, ci} Xp[n, w*stride + rw*dilation, ci] *
    Wt[co, rw, ci]`` (``Xp``: ``X`` zero-padded by ``pad`` on both sides).

    Returns ``[X (N, W, CI), Wt (CO, KW, CI), Y (N, WO, CO)]`` with
    ``WO = (W + 2*pad - dilation*(KW-1) - 1) // stride + 1``; FLOP count ``2·N·WO·CO·CI·KW``.
    """
    return _conv_nd(N, (W,), CI, CO, (KW,), stride, pad, dilation, dtype)


def c2d(
    N: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """2-D convolution, NHWC: ``Y[n, h, w, co] = sum_{rh, rw, ci}
    Xp[n, h*s + rh*d, w*s + rw*d, ci] * Wt[co, rh, rw, ci]`` (``s`` stride, ``d`` dilation).

    Returns ``[X (N, H, W, CI), Wt (CO, KH, KW, CI), Y (N, HO, WO, CO)]`` with
    ``HO = (H + 2*pad - d*(KH-1) - 1) // s + 1`` (``WO`` alike); FLOP count
    ``2·N·HO·WO·CO·CI·KH·KW``.
    """
    return _conv_nd(N, (H, W), CI, CO, (KH, KW), stride, pad, dilation, dtype)


def c3d(
    N: int,
    D: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    KD: int,
    KH: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """3-D convolution, NDHWC, as :func:`c2d` with a depth dimension.

    Returns ``[X (N, D, H, W, CI), Wt (CO, KD, KH, KW, CI), Y (N, DO, HO, WO, CO)]``; FLOP
    count ``2·N·DO·HO·WO·CO·CI·KD·KH·KW``.
    """
    return _conv_nd(N, (D, H, W), CI, CO, (KD, KH, KW), stride, pad, dilation, dtype)


def dil(
    N: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 2,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """Dilated 2-D convolution: :func:`c2d` with ``dilation`` 2 by default (Heron's DIL).

    Returns ``[X (N, H, W, CI), Wt (CO, KH, KW, CI), Y (N, HO, WO, CO)]``; FLOP count
    ``2·N·HO·WO·CO·CI·KH·KW``.
    """
    return c2d(N, H, W, CI, CO, KH, KW, stride, pad, dilation, dtype)


def t2d(
    N: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    output_padding: int = 0,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """Transposed 2-D convolution with PyTorch ``ConvTranspose2d`` semantics, NHWC.

    ``Y[n, oh, ow, co] = sum X[n, ih, iw, ci] * Wt[co, kh, kw, ci]`` over every
    ``oh = ih*stride - pad + kh*dilation`` (``ow`` alike), i.e. PyTorch's result with its weight
    ``(CI, CO, KH, KW)`` stored here as ``(CO, KH, KW, CI)``. Computed as a direct convolution
    (stride 1) over ``Xd``, the input with ``stride - 1`` zeros between elements and
    ``dilation*(K-1) - pad`` zeros around it (one data-movement stage), with the kernel flipped:
    ``Y[n, oh, ow, co] = sum_{rh, rw, ci} Xd[n, oh + rh*d, ow + rw*d, ci] *
    Wt[co, KH-1-rh, KW-1-rw, ci]``. Where ``Xd`` would equal ``X`` (stride 1, no zeros around:
    ``pad = dilation*(K-1)``, no output padding, e.g. a 1 × 1 kernel without padding), the
    product reads ``X`` itself: no data-movement stage.

    Returns ``[X (N, H, W, CI), Wt (CO, KH, KW, CI), Y (N, HO, WO, CO)]`` with
    ``HO = (H-1)*stride - 2*pad + dilation*(KH-1) + output_padding + 1`` (``WO`` alike);
    FLOP count ``2·N·HO·WO·CO·CI·KH·KW`` (the multiplications by inserted zeros included, as
    the kernel performs them). When every output takes at most one tap (``KH, KW <= stride``,
    dilation 1: the 1 × 1 and 2 × 2 kernels of stride 2 of up-sampling decoders), the compute is
    instead the sub-pixel form (:func:`_t2d_subpixel`): one matrix product over the input
    pixels and a stage that places its results, ``2·N·H·W·KH·KW·CO·CI`` operations, without the
    multiplications by inserted zeros.

    Raises:
        InvalidComputeError: also when ``output_padding >= max(stride, dilation)`` (PyTorch's
            rule) or an output extent is ``<= 0``.
    """
    _check(N=N, H=H, W=W, CI=CI, CO=CO, KH=KH, KW=KW)
    _check_conv(stride, pad, dilation)
    if not isinstance(output_padding, int) or not 0 <= output_padding < max(stride, dilation):
        raise InvalidComputeError(
            f"output_padding={output_padding!r} must be in [0, max(stride, dilation))"
        )
    a, b, c = dtypes(dtype)
    sizes = []
    for name, size, k in (("HO", H, KH), ("WO", W, KW)):
        out = (size - 1) * stride - 2 * pad + dilation * (k - 1) + output_padding + 1
        if out <= 0:
            raise InvalidComputeError(f"output extent {name}={out} <= 0")
        sizes.append(out)
    HO, WO = sizes
    X = te.placeholder((N, H, W, CI), a, name="X")
    Wt = te.placeholder((CO, KH, KW, CI), b, name="W")
    if stride > 1 and dilation == 1 and KH <= stride and KW <= stride:
        return [X, Wt, _t2d_subpixel(X, Wt, (HO, WO), stride, pad, c)]
    lead = (dilation * (KH - 1) - pad, dilation * (KW - 1) - pad)  # zeros before row/col 0

    def dilate(n: Any, i: Any, j: Any, ci_: Any) -> Any:
        conds, src = [], []
        for idx, before, size in ((i, lead[0], H), (j, lead[1], W)):
            p = idx - before
            conds += [p >= 0, p <= (size - 1) * stride]
            if stride > 1:
                conds.append(tirx.floormod(p, stride) == 0)
            src.append(tirx.floordiv(p, stride) if stride > 1 else p)
        return tirx.if_then_else(
            tirx.all(*conds), X[n, src[0], src[1], ci_], tirx.const(0, X.dtype)
        )

    xd_shape = (N, HO + dilation * (KH - 1), WO + dilation * (KW - 1), CI)
    if stride == 1 and lead == (0, 0) and xd_shape == (N, H, W, CI):
        Xd = X  # nothing inserted, nothing around: a copy of X would only cost a pass over it
    else:
        Xd = te.compute(xd_shape, dilate, name="Xd")
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    ci = te.reduce_axis((0, CI), name="ci")
    Y = te.compute(
        (N, HO, WO, CO),
        lambda n, h, w, co: te.sum(
            Xd[n, h + rh * dilation, w + rw * dilation, ci].astype(c)
            * Wt[co, KH - 1 - rh, KW - 1 - rw, ci].astype(c),
            axis=[rh, rw, ci],
        ),
        name="Y",
    )
    return [X, Wt, Y]


def _t2d_subpixel(
    X: te.Tensor, Wt: te.Tensor, out_hw: tuple[int, int], stride: int, pad: int, acc: str
) -> te.Tensor:
    """:func:`t2d` when each output element takes at most one kernel tap (``KH, KW <= stride``,
    dilation 1; a 1 × 1 or 2 × 2 kernel of stride 2): output row ``oh`` reads input row
    ``(oh + pad) // stride`` through tap ``(oh + pad) % stride`` (none when that is ``>= KH``).
    So the products are one matrix product over the input pixels, ``P[n, h, w, kh, kw, co] =
    sum_ci X[n, h, w, ci] * Wt[co, kh, kw, ci]``, and ``Y`` places each product (a data-movement
    stage, zero where no tap lands): the inserted zeros are never multiplied (the sub-pixel
    decomposition of a strided transposed convolution; oneDNN's ConvTranspose does the same).
    """
    N, H, W, CI = (int(d) for d in X.shape)
    CO, KH, KW = (int(d) for d in Wt.shape[:3])
    ci = te.reduce_axis((0, CI), name="ci")
    P = te.compute(
        (N, H, W, KH, KW, CO),
        lambda n, h, w, kh, kw, co: te.sum(
            X[n, h, w, ci].astype(acc) * Wt[co, kh, kw, ci].astype(acc), axis=ci
        ),
        name="P",
    )

    def place(n: Any, oh: Any, ow: Any, co: Any) -> Any:
        conds, src = [], []
        for o, k, size in ((oh, KH, H), (ow, KW, W)):
            i, tap = tirx.floordiv(o + pad, stride), tirx.floormod(o + pad, stride)
            conds += [tap < k, i < size]
            src += [tirx.min(i, size - 1), tirx.min(tap, k - 1)]  # in bounds when unused
        value = P[n, src[0], src[2], src[1], src[3], co]
        return tirx.if_then_else(tirx.all(*conds), value, tirx.const(0, acc))

    return te.compute((N, *out_hw, CO), place, name="Y")


def group_c2d(
    N: int,
    H: int,
    W: int,
    CI: int,
    CO: int,
    KH: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    groups: int = 2,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """Grouped 2-D convolution with ``groups`` groups ``G``; ``CIg = CI/G``, ``COg = CO/G``.

    Layout: the group index is its own dimension, so every index stays plain and the group
    is a batch axis of the intrinsic: ``X (N, H, W, G, CIg)``, ``Wt (G, COg, KH, KW, CIg)``,
    ``Y (N, HO, WO, G, COg)``. In memory these are exactly NHWC ``(N, H, W, CI)``,
    ``(CO, KH, KW, CIg)`` (PyTorch's grouped weight with channels last) and NHWC
    ``(N, HO, WO, CO)``, channel ``c = g*CIg + i``. ``Y[n, h, w, g, o] = sum_{rh, rw, i}
    Xp[n, h*s + rh*d, w*s + rw*d, g, i] * Wt[g, o, rh, rw, i]``.

    Returns ``[X, Wt, Y]`` as above; FLOP count ``2·N·HO·WO·CO·CIg·KH·KW``.

    Raises:
        InvalidComputeError: also when ``groups`` does not divide ``CI`` and ``CO``.
    """
    _check(N=N, H=H, W=W, CI=CI, CO=CO, KH=KH, KW=KW, groups=groups)
    _check_conv(stride, pad, dilation)
    if CI % groups or CO % groups:
        raise InvalidComputeError(f"groups={groups} must divide CI={CI} and CO={CO}")
    a, b, c = dtypes(dtype)
    G, CIg, COg = groups, CI // groups, CO // groups
    HO = _out_size("HO", H, KH, stride, pad, dilation)
    WO = _out_size("WO", W, KW, stride, pad, dilation)
    X = te.placeholder((N, H, W, G, CIg), a, name="X")
    Wt = te.placeholder((G, COg, KH, KW, CIg), b, name="W")
    Xp = _pad_input(X, pad, 2)
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    ci = te.reduce_axis((0, CIg), name="ci")
    Y = te.compute(
        (N, HO, WO, G, COg),
        lambda n, h, w, g, o: te.sum(
            Xp[n, h * stride + rh * dilation, w * stride + rw * dilation, g, ci].astype(c)
            * Wt[g, o, rh, rw, ci].astype(c),
            axis=[rh, rw, ci],
        ),
        name="Y",
    )
    return [X, Wt, Y]


def scan(M: int, N: int, K: int, dtype: str = "int8") -> list[te.Tensor]:
    """Heron's SCAN (``ops/x86/scan.py``, ``ops/cuda/scan.py``): a prefix sum written as a
    matrix product with a generated 0/1 lower-triangular matrix.

    ``T[n, k] = 1 if n > k else 0`` (stage ``T``, computed inside the kernel, weight dtype),
    ``Y[m, n] = sum_k X[m, k] * T[n, k] = sum_{k < min(n, K)} X[m, k]``: an *exclusive* prefix
    sum of each row of ``X`` along ``K``, evaluated at ``N`` positions (``N == K`` is the full
    exclusive scan; positions ``n > K`` repeat the row total).

    Returns ``[X (M, K), Y (M, N)]``; FLOP count ``2·M·N·K`` (as the matrix product computes).
    """
    _check(M=M, N=N, K=K)
    a, b, c = dtypes(dtype)
    X = te.placeholder((M, K), a, name="X")
    T = te.compute(
        (N, K),
        lambda n, k: tirx.if_then_else(n > k, tirx.const(1, b), tirx.const(0, b)),
        name="Tri",
    )
    k = te.reduce_axis((0, K), name="k")
    Y = te.compute(
        (M, N), lambda i, j: te.sum(X[i, k].astype(c) * T[j, k].astype(c), axis=k), name="Y"
    )
    return [X, Y]


OPERATORS.update(
    {
        "c1d": (c1d, ("N", "W", "CI", "CO", "KW", "stride", "pad", "dilation")),
        "c2d": (c2d, ("N", "H", "W", "CI", "CO", "KH", "KW", "stride", "pad", "dilation")),
        "c3d": (
            c3d,
            ("N", "D", "H", "W", "CI", "CO", "KD", "KH", "KW", "stride", "pad", "dilation"),
        ),
        "dil": (dil, ("N", "H", "W", "CI", "CO", "KH", "KW", "stride", "pad", "dilation")),
        "t2d": (
            t2d,
            ("N", "H", "W", "CI", "CO", "KH", "KW", "stride", "pad", "dilation", "output_padding"),
        ),
        "group_c2d": (
            group_c2d,
            ("N", "H", "W", "CI", "CO", "KH", "KW", "stride", "pad", "dilation", "groups"),
        ),
        "scan": (scan, ("M", "N", "K")),
    }
)


def depthwise_c2d(
    N: int,
    H: int,
    W: int,
    C: int,
    KH: int,
    KW: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "int8",
) -> list[te.Tensor]:
    """Depthwise 2-D convolution, NHWC: every channel is convolved with its own filter,
    ``Y[n, h, w, c] = sum_{rh, rw} Xp[n, h*stride + rh*dilation, w*stride + rw*dilation, c] *
    Wt[c, rh, rw]`` (``Xp``: ``X`` zero-padded by ``pad`` on both spatial sides, a separate
    stage).

    Returns ``[X (N, H, W, C), Wt (C, KH, KW), Y (N, HO, WO, C)]`` with
    ``HO = (H + 2*pad - dilation*(KH-1) - 1) // stride + 1`` (``WO`` likewise); FLOP count
    ``2·N·HO·WO·C·KH·KW``. There is no reduction over channels, so no matrix intrinsic applies:
    on DL Boost it needs the general rule set (target ``"dlboost -general"``).
    """
    _check(N=N, H=H, W=W, C=C, KH=KH, KW=KW)
    _check_conv(stride, pad, dilation)
    a, b, c = dtypes(dtype)
    HO = _out_size("HO", H, KH, stride, pad, dilation)
    WO = _out_size("WO", W, KW, stride, pad, dilation)
    X = te.placeholder((N, H, W, C), a, name="X")
    Wt = te.placeholder((C, KH, KW), b, name="W")
    Xp = _pad_input(X, pad, 2)
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    Y = te.compute(
        (N, HO, WO, C),
        lambda n, h, w, ch: te.sum(
            Xp[n, h * stride + rh * dilation, w * stride + rw * dilation, ch].astype(c)
            * Wt[ch, rh, rw].astype(c),
            axis=[rh, rw],
        ),
        name="Y",
    )
    return [X, Wt, Y]


OPERATORS["depthwise_c2d"] = (
    depthwise_c2d,
    ("N", "H", "W", "C", "KH", "KW", "stride", "pad", "dilation"),
)


# -- requantisation epilogue ----------------------------------------------------------------------


def requantize(
    compute: Sequence[te.Tensor],
    shift: int,
    *,
    bias: bool = False,
    clip: tuple[int, int] | None = (-128, 127),
    out_dtype: str = "int8",
) -> list[te.Tensor]:
    """An int32 matrix product or convolution followed by an int8 requantisation epilogue:
    ``E = cast(clip((C + bias[co]) >> shift, lo, hi), out_dtype)``, elementwise over the
    output ``C`` of ``compute`` (the last tensor of e.g. :func:`gemm`, :func:`bmm`,
    :func:`c2d` with ``dtype="int8-int8"``).

    The epilogue is one TE stage after the reduction (``tirx`` ``+``, ``>>`` (arithmetic on
    int32), ``min``, ``max``, cast), the standard VTA epilogue (vta.md §2.4) that the VTA
    target lowers to ALU instructions on the accumulator and one int8 store; any other target
    fuses it as an element-wise epilogue.

    Args:
        compute: ``[inputs..., C]`` with ``C`` an int32 tensor whose last dimension is the
            output channel (``N`` of a GEMM, ``CO`` of an NHWC convolution).
        shift: arithmetic right shift, ``0 ≤ shift < 32`` (``0``: no shift op).
        bias: add a per-output-channel int32 ``bias (C.shape[-1],)`` before the shift (a new
            input, placed after the compute's inputs).
        clip: ``(lo, hi)``: ``max(min(x, hi), lo)`` before the cast; None for none (the cast
            then wraps, keeping the low bits, as a VTA store does).
        out_dtype: ``"int8"`` (the requantised result) or ``"int32"`` (no narrowing).

    Returns:
        ``[inputs..., (bias,) E]``: ``E`` has ``C``'s shape and ``out_dtype``; ``C`` becomes
        an intermediate stage. FLOP count: the compute's plus one per output element.

    Raises:
        InvalidComputeError: an empty ``compute``, a shift outside ``[0, 32)``, ``lo > hi``.
        UnsupportedDtypeError: ``C`` is not int32, or ``out_dtype`` not int8/int32.
    """
    if not compute or not isinstance(compute[-1], te.Tensor):
        raise InvalidComputeError("requantize needs a compute list ending with its output")
    *inputs, C = compute
    if str(C.dtype) != "int32":
        raise UnsupportedDtypeError(f"requantize needs an int32 result, {C.name} is {C.dtype}")
    if out_dtype not in ("int8", "int32"):
        raise UnsupportedDtypeError(f"requantize writes int8 or int32, not {out_dtype!r}")
    if not isinstance(shift, int) or not 0 <= shift < 32:
        raise InvalidComputeError(f"shift={shift!r} must be an integer in [0, 32)")
    if clip is not None and not (
        isinstance(clip[0], int) and isinstance(clip[1], int) and clip[0] <= clip[1]
    ):
        raise InvalidComputeError(f"clip={clip!r} must be (lo, hi) integers with lo <= hi")
    shape = [int(s) for s in C.shape]
    B = te.placeholder((shape[-1],), "int32", name="bias") if bias else None

    def body(*idx: Any) -> Any:
        x = C[idx]
        if B is not None:
            x = x + B[idx[-1]]
        if shift:
            x = x >> shift
        if clip is not None:
            x = tirx.max(tirx.min(x, clip[1]), clip[0])
        return x.astype(out_dtype) if out_dtype != "int32" else x

    E = te.compute(shape, body, name="E")
    return [*inputs, *([B] if B is not None else []), E]
