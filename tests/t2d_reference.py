"""The transposed 2-D convolution's reference and the sub-pixel form's sampled-program check,
shared by tests/test_ops.py (DL Boost) and tests/test_general.py (the general rule set)."""

from __future__ import annotations

import numpy as np

from heronlike import ops
from heronlike.space import generate_space


def rand_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Integers over their whole range; floating point uniform in [-1, 1)."""
    if np.issubdtype(np.dtype(dtype), np.floating):
        return rng.uniform(-1, 1, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def t2d_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dilation: int, outpad: int):
    """ConvTranspose2d by its definition (scatter): every input pixel adds
    ``x[ih, iw] * w[kh, kw]`` at ``(ih*stride - pad + kh*dilation, ...)``; int64 for integer
    inputs, float64 for floating-point ones."""
    N, H, W, _ = x.shape
    CO, KH, KW, _ = w.shape
    HO = (H - 1) * stride - 2 * pad + dilation * (KH - 1) + outpad + 1
    WO = (W - 1) * stride - 2 * pad + dilation * (KW - 1) + outpad + 1
    acc = np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64
    full = np.zeros(
        (N, (H - 1) * stride + dilation * (KH - 1) + 1 + outpad,
         (W - 1) * stride + dilation * (KW - 1) + 1 + outpad, CO),
        acc,
    )  # fmt: skip
    x64 = x.astype(acc)
    for kh in range(KH):
        for kw in range(KW):
            contrib = x64 @ w[:, kh, kw, :].astype(acc).T  # (N, H, W, CO)
            full[
                :,
                kh * dilation : kh * dilation + (H - 1) * stride + 1 : stride,
                kw * dilation : kw * dilation + (W - 1) * stride + 1 : stride,
            ] += contrib
    return full[:, pad : pad + HO, pad : pad + WO]


SUBPIXEL_SHAPES = [
    (1, 6, 5, 16, 32, 1, 1, 2, 0, 1, 0),  # T4/T6's form: 1 x 1, stride 2
    (1, 5, 6, 16, 32, 2, 2, 2, 0, 1, 1),  # 2 x 2 stride 2, output padding
    (2, 4, 5, 16, 16, 2, 3, 3, 1, 1, 2),  # taps < stride, padding
]
#: the shapes whose placement stage is computed in the product's tiles: 1 x 1 taps, no padding
#: (a tap chosen by ``oh % 2`` or an offset ``(oh + 1) // 3`` would make tiles share outputs)
FUSED_PLACEMENT = {SUBPIXEL_SHAPES[0]}


def check_fused_placement_samples(target: str, dtype: str, samples: int = 6) -> None:
    """Every RandSAT sample of the sub-pixel transposed convolution's space on ``target``
    equals the scatter definition on random inputs (bit for bit for integers), and computes
    its placement stage ``Y`` inside the product's tile loops exactly for
    :data:`FUSED_PLACEMENT` (each tile's outputs and the zeros between them written while the
    tile is hot), elsewhere in a loop nest of its own after the product."""
    from heronlike.kernel import BuiltKernel
    from heronlike.sampler import RandSAT

    rng = np.random.default_rng(5)
    for shape in SUBPIXEL_SHAPES:
        _, _, _, _, _, _, _, stride, pad, dilation, outpad = shape
        compute = ops.t2d(*shape, dtype=dtype)
        space = generate_space(compute, target)
        inputs = [
            rand_input(rng, tuple(int(d) for d in t.shape), str(t.dtype)) for t in compute[:-1]
        ]
        expected = t2d_ref(*inputs, stride, pad, dilation, outpad)
        for sample in RandSAT(space.csp, seed=3).sample(samples):
            kernel = BuiltKernel(space, sample, space.target.tvm_target())
            sch = kernel.schedule
            product = next(b for b in ("P_update_o", "P_update", "P") if _has_block(sch, b))
            outer = [sch.get(sch.get_loops(sch.get_sblock(b))[0]) for b in ("Y", product)]
            assert outer[0].same_as(outer[1]) == (shape in FUSED_PLACEMENT), shape
            out = kernel(*inputs)
            if dtype == "int8":
                np.testing.assert_array_equal(out.astype(np.int64), expected)
            else:
                np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def _has_block(sch, name: str) -> bool:  # noqa: ANN001
    try:
        sch.get_sblock(name)
    except Exception:  # noqa: BLE001 - TVM raises its own error for an unknown block
        return False
    return True
