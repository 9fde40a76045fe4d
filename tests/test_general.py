"""Computes with no stage that VNNI runs, and fused element-wise epilogues, on DL Boost.

By default such a compute is a typed error naming the ``-general`` option; with it, the general
rule set (rules/general.py) tunes them. Real tunes, checked against numpy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import te  # noqa: E402

import heronlike.dla_targets.dlboost as dlboost  # noqa: E402
from heronlike import ops, tune  # noqa: E402
from heronlike.errors import (  # noqa: E402
    NoTensorizableStageError,
    UnknownTargetError,
    UnsupportedDtypeError,
)
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import generate_space  # noqa: E402
from heronlike.target import get_target  # noqa: E402

pytestmark = pytest.mark.skipif(not dlboost.host_has_vnni(), reason="host has no AVX512-VNNI")

FAST = dict(number=1, repeat=2, min_repeat_ms=0.0, final_repeat=2)


def gemm_bias_relu(M: int, N: int, K: int, dtype: str) -> list[te.Tensor]:
    """``E = relu(X @ W.T + bias)``: ``[X (M, K), W (N, K), bias (N,), E (M, N)]``."""
    X, W, C = ops.gemm(M, N, K, dtype)
    bias = te.placeholder((N,), C.dtype, name="bias")
    D = te.compute((M, N), lambda i, j: C[i, j] + bias[j], name="D")
    E = te.compute((M, N), lambda i, j: te.max(D[i, j], te.const(0, C.dtype)), name="E")
    return [X, W, bias, E]


def _depthwise_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, h, wd, c = x.shape
    _, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, ho, wo, c), np.int64)
    for r in range(kh):
        for s in range(kw):
            window = xp[:, r : r + stride * ho : stride, s : s + stride * wo : stride, :]
            out += window * w[:, r, s].astype(np.int64)
    return out


# -- the option and its error ---------------------------------------------------------------------


def test_default_refuses_and_names_the_option() -> None:
    with pytest.raises(NoTensorizableStageError, match='"dlboost -general"'):
        generate_space(ops.depthwise_c2d(1, 8, 8, 32, 3, 3), "dlboost")
    with pytest.raises(UnsupportedDtypeError, match='"general": True'):
        generate_space(gemm_bias_relu(16, 32, 16, "float32"), "dlboost")


def test_general_option_forms() -> None:
    plain = get_target("dlboost -num-cores=2")
    assert plain.requires_intrinsic and "general" not in plain.key
    by_string = get_target("dlboost -general -num-cores=2")
    by_dict = get_target({"kind": "dlboost", "general": True, "num-cores": 2})
    assert by_string.key == by_dict.key and "-general" in by_string.key
    assert not by_string.requires_intrinsic
    with pytest.raises(UnknownTargetError, match="general"):
        get_target("dlboost -generic")


# -- the general rule set -------------------------------------------------------------------------


def test_general_space_vectorizes_within_one_register() -> None:
    """The V level (innermost, output's last axis) is vectorised and at most 16 float32 lanes
    long; every sampled program applies."""
    space = generate_space(ops.gemm(16, 48, 24, "float32"), "dlboost -general")
    text = str(space.template)
    assert "sch.vectorize(C.v_j.V)" in text and "decompose_reduction" in text
    assert "sch.parallel(C.P)" in text and "tensorize" not in text
    # the weight W[j, k] is pre-packed as [k, j], so the vector loads over j are contiguous
    assert "sch.transform_layout(b_C, 'W', lambda x0, x1: (x1, x0))" in text
    assert set(space.packed) == {"W"}
    samples = RandSAT(space.csp, seed=1).sample(32)
    assert len(samples) == 32
    for a in samples:
        assert a["C.v_j.V"] <= 16 and 48 % a["C.v_j.V"] == 0
        space.apply(a)


def test_float32_gemm_bias_relu(tmp_path: Path) -> None:
    compute = gemm_bias_relu(16, 40, 24, "float32")
    result = tune(
        compute, "dlboost -general", trials=6, batch_size=6, records=tmp_path / "r", **FAST
    )
    assert result.valid == 6 and result.correct is True, result.errors
    text = str(result.space.template)
    # the epilogue (bias and ReLU, one stage after inlining) runs inside the GEMM's tiles
    assert "sch.compute_inline(b_D)" in text and "sch.reverse_compute_at(b_E" in text
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    np.testing.assert_allclose(result.kernel(x, w, b), want, rtol=1e-4, atol=1e-4)


def test_int8_depthwise_c2d(tmp_path: Path) -> None:
    stride, pad = 2, 1
    compute = ops.depthwise_c2d(1, 9, 9, 32, 3, 3, stride=stride, pad=pad)
    result = tune(
        compute, "dlboost -general", trials=4, batch_size=4, records=tmp_path / "r", **FAST
    )
    assert result.valid == 4 and result.correct is True, result.errors
    assert result.flop == 2 * result.kernel.space.dag.params[2].shape[1] ** 2 * 32 * 9
    rng = np.random.default_rng(9)
    x = rng.integers(0, 255, (1, 9, 9, 32), dtype=np.uint8, endpoint=True)
    w = rng.integers(-128, 127, (32, 3, 3), dtype=np.int8, endpoint=True)
    out = result.kernel(x, w)
    assert np.array_equal(out.astype(np.int64), _depthwise_ref(x, w, stride, pad))


def test_int8_gemm_bias_relu_uses_the_intrinsic_and_fuses(tmp_path: Path) -> None:
    """One stage maps onto VNNI and the epilogue is fused into its tiles; N = 40 is also
    padded, and the epilogue reads the padded result directly. ``-general`` changes nothing
    for a compute that has a tensorizable stage."""
    compute = gemm_bias_relu(8, 40, 20, "int8")
    result = tune(compute, "dlboost", trials=4, batch_size=4, records=tmp_path / "r", **FAST)
    assert result.valid == 4 and result.correct is True, result.errors
    text = str(result.space.template)
    assert "tensorize" in text and "sch.reverse_compute_at(b_E" in text
    assert "sch.compute_inline(b_C_pad)" in text
    general = generate_space(compute, "dlboost -general")
    assert str(general.template) == text and str(general.csp) == str(result.space.csp)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 255, (8, 20), dtype=np.uint8, endpoint=True)
    w = rng.integers(-128, 127, (40, 20), dtype=np.int8, endpoint=True)
    b = rng.integers(-50000, 50000, 40, dtype=np.int32)
    want = np.maximum(x.astype(np.int64) @ w.T.astype(np.int64) + b, 0)
    assert np.array_equal(result.kernel(x, w, b).astype(np.int64), want)


def test_elementwise_compute(tmp_path: Path) -> None:
    A = te.placeholder((64, 48), "float32", name="A")
    B = te.placeholder((64, 48), "float32", name="B")
    C = te.compute((64, 48), lambda i, j: A[i, j] * 2.0 + B[i, j], name="C")
    result = tune([A, B, C], "dlboost -general", trials=1, records=tmp_path / "r", **FAST)
    assert result.valid == 1 and result.correct is True
    assert "sch.parallel" in result.trace and "sch.vectorize" in result.trace
    a = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    np.testing.assert_allclose(result.kernel(a, a), 3 * a)


@pytest.mark.parametrize(("target", "dtype"), [("llvm", "float32"), ("dlboost -general", "int8")])
def test_subpixel_placement_fused_on_the_general_rule_set(target: str, dtype: str) -> None:
    """The general rule set fuses the sub-pixel transposed convolution's placement into the
    product's tiles as DL Boost does (tests/test_ops.py), exact on every sampled program."""
    sys.path.insert(0, str(Path(__file__).parent))
    from t2d_reference import check_fused_placement_samples

    check_fused_placement_samples(target, dtype, samples=4)


def test_general_accumulators_are_counted_in_whole_registers() -> None:
    """C5 on the general rule set counts one vector register per accumulator of the register
    tile, however few lanes the vector level ``V`` fills: at most 32 - 5 of them on AVX-512.
    Counted in bytes, a C2D3 tile of 2 x 28 one-lane accumulators passed as 224 bytes and
    spilled (0.36x in ``benchmarks/loop_order.py --dtype float32``)."""
    space = generate_space(ops.c2d(1, 28, 28, 128, 128, 3, 3, 1, 1, 1, "float32"), "llvm")
    tile = [v for v in space.csp.knobs if v.startswith("Y.") and v.endswith(".S2")]
    points = RandSAT(space.csp, seed=2).sample(40)
    limit = dlboost.VECTOR_REGISTERS - dlboost.RESERVED_REGISTERS
    for point in points:
        assert np.prod([point[v] for v in tile]) <= limit, point
    assert min(point["Y.v_i2.V"] for point in points) < 16  # partial vectors were drawn
