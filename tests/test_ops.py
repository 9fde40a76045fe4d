"""Operators of heronlike.ops: real tunes on DL Boost whose best kernel matches numpy.

Every reference here is written independently of the TE definitions (numpy slices, einsum and
scatter loops, int64 accumulation), and the tuned kernel is run on fresh random inputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import heronlike
from heronlike import ops
from heronlike.errors import InvalidComputeError, UnsupportedDtypeError
from heronlike.space import generate_space

sys.path.insert(0, str(Path(__file__).parent))  # the shared reference helpers
from scan_reference import scan_ref  # noqa: E402
from t2d_reference import (  # noqa: E402
    SUBPIXEL_SHAPES,
    check_fused_placement_samples,
    t2d_ref,
)

pytestmark = pytest.mark.skipif(
    not __import__("heronlike.dla_targets.dlboost", fromlist=["x"]).host_has_vnni(),
    reason="needs AVX512-VNNI",
)


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dilation: int) -> np.ndarray:
    """N-D channels-last convolution: x (N, *S, CI), w (CO, *K, CI) -> (N, *SO, CO), int64."""
    nd = x.ndim - 2
    xp = np.pad(x.astype(np.int64), [(0, 0)] + [(pad, pad)] * nd + [(0, 0)])
    kernel = w.shape[1:-1]
    out = [
        (s + 2 * pad - dilation * (k - 1) - 1) // stride + 1 for s, k in zip(x.shape[1:-1], kernel)
    ]
    y = np.zeros((x.shape[0], *out, w.shape[0]), np.int64)
    for offs in np.ndindex(*kernel):
        sl = tuple(
            slice(o * dilation, o * dilation + (n - 1) * stride + 1, stride)
            for o, n in zip(offs, out)
        )
        patch = xp[(slice(None), *sl, slice(None))]  # (N, *SO, CI)
        y += patch @ w[(slice(None), *offs, slice(None))].astype(np.int64).T
    return y


def _tune_and_check(compute, reference, tmp_path, trials: int = 4) -> heronlike.TuneResult:
    result = heronlike.tune(
        compute, "dlboost", trials=trials, batch_size=trials, records=tmp_path / "r.sqlite"
    )
    assert result.valid > 0, result.errors
    assert result.correct
    rng = np.random.default_rng(123)
    inputs = [_rand(rng, tuple(int(d) for d in t.shape), str(t.dtype)) for t in compute[:-1]]
    out = result.kernel(*inputs)
    expected = reference(*inputs)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.astype(np.int64), expected)
    return result


def test_c2d_stride2_pad1(tmp_path):
    compute = ops.c2d(1, 8, 8, 16, 32, 3, 3, stride=2, pad=1)
    _tune_and_check(compute, lambda x, w: conv_ref(x, w, 2, 1, 1), tmp_path)


def test_dil(tmp_path):
    compute = ops.dil(1, 9, 9, 16, 32, 3, 3, pad=1)  # dilation 2 by default
    assert [int(d) for d in compute[-1].shape] == [1, 7, 7, 32]
    _tune_and_check(compute, lambda x, w: conv_ref(x, w, 1, 1, 2), tmp_path)


def test_c1d(tmp_path):
    compute = ops.c1d(2, 16, 8, 32, 3, stride=1, pad=2, dilation=2)
    _tune_and_check(compute, lambda x, w: conv_ref(x, w, 1, 2, 2), tmp_path)


def test_c3d(tmp_path):
    compute = ops.c3d(1, 4, 5, 5, 16, 16, 3, 3, 3, stride=2, pad=1)
    _tune_and_check(compute, lambda x, w: conv_ref(x, w, 2, 1, 1), tmp_path)


def test_t2d_stride2_dilation2(tmp_path):
    stride, pad, dilation, outpad = 2, 1, 2, 1
    compute = ops.t2d(1, 5, 6, 16, 32, 3, 3, stride, pad, dilation, outpad)
    assert [int(d) for d in compute[-1].shape] == [1, 12, 14, 32]  # (H-1)*2 - 2 + 4 + 1 + 1
    _tune_and_check(compute, lambda x, w: t2d_ref(x, w, stride, pad, dilation, outpad), tmp_path)


@pytest.mark.parametrize("kernel, pad", [(1, 0), (3, 2)])
def test_t2d_without_inserted_or_surrounding_zeros_reads_x(kernel, pad, tmp_path):
    """Stride 1 with pad = dilation*(K-1): the dilated input would equal X, so the product reads
    X itself (no copy of X per call: T2's 1 × 1 ran 9 % behind C2D2's same product with it)."""
    from heronlike.dag import ComputeDAG

    compute = ops.t2d(1, 6, 7, 16, 32, kernel, kernel, 1, pad)
    assert [s.name for s in ComputeDAG.from_compute(compute).stages] == ["Y"]
    _tune_and_check(compute, lambda x, w: t2d_ref(x, w, 1, pad, 1, 0), tmp_path)
    # one zero around (pad 1 of a 3 x 3) still needs the padded copy
    assert "Xd" in [
        s.name for s in ComputeDAG.from_compute(ops.t2d(1, 6, 7, 16, 32, 3, 3, 1, 1)).stages
    ]


@pytest.mark.parametrize("shape", SUBPIXEL_SHAPES)
def test_t2d_subpixel_form_skips_the_inserted_zeros(shape, tmp_path):
    """KH, KW <= stride: one product per input pixel and tap (no multiplication by an
    inserted zero), exact against the scatter definition."""
    from heronlike.dag import ComputeDAG

    N, H, W, CI, CO, KH, KW, stride, pad, dilation, outpad = shape
    compute = ops.t2d(*shape)
    dag = ComputeDAG.from_compute(compute)
    assert dag.flop() == 2 * N * H * W * KH * KW * CO * CI
    # VNNI's 16 lanes run over the output channels, not over a tap axis padded to 16
    assert generate_space(compute, "dlboost").matches["P"].n_axis == "v_co"
    _tune_and_check(compute, lambda x, w: t2d_ref(x, w, stride, pad, dilation, outpad), tmp_path)


def test_t2d_subpixel_placement_is_fused_into_the_product_tiles() -> None:
    check_fused_placement_samples("dlboost", "int8")


def test_t2d_matches_torch_definition():
    """The scatter reference agrees with PyTorch's ConvTranspose2d when torch is installed."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, (1, 4, 5, 3)).astype(np.float64)
    w = rng.integers(-3, 4, (2, 3, 3, 3)).astype(np.float64)  # (CO, KH, KW, CI)
    got = t2d_ref(x.astype(np.int64), w.astype(np.int64), 2, 1, 2, 1)
    tx = torch.tensor(x).permute(0, 3, 1, 2)
    tw = torch.tensor(w).permute(3, 0, 1, 2)  # (CI, CO, KH, KW)
    ref = torch.nn.functional.conv_transpose2d(
        tx, tw, stride=2, padding=1, dilation=2, output_padding=1
    )
    np.testing.assert_array_equal(got, ref.permute(0, 2, 3, 1).numpy().astype(np.int64))


def test_group_c2d(tmp_path):
    G = 2
    compute = ops.group_c2d(1, 8, 8, 16, 32, 3, 3, stride=1, pad=1, groups=G)

    def ref(x, w):  # x (N,H,W,G,CIg), w (G,COg,KH,KW,CIg)
        return np.stack([conv_ref(x[:, :, :, g], w[g], 1, 1, 1) for g in range(G)], axis=3)

    _tune_and_check(compute, ref, tmp_path)


def test_scan(tmp_path):
    M, N, K = 16, 32, 16
    compute = ops.scan(M, N, K)

    _tune_and_check(compute, lambda x: scan_ref(x, N), tmp_path)


def test_gemv(tmp_path):
    compute = ops.gemv(64, 32)
    _tune_and_check(compute, lambda x, a: a.astype(np.int64) @ x.astype(np.int64), tmp_path)


def test_conv_space_is_tensorized_with_packed_weights():
    space = generate_space(ops.c2d(1, 8, 8, 16, 32, 3, 3, 2, 1, 1), "dlboost")
    (m,) = space.matches.values()
    assert (m.a.buffer, m.b.buffer) == ("Xp", "W")
    assert space.packed["W"].packed_shape((32, 3, 3, 16)) == (2, 3, 3, 4, 16, 4)  # OhwI16o4i
    text = str(space.template)
    assert "compute_inline" not in text and "parallelize_vectorize" in text
    # the input footprint over a tile is bounded by (t_h - 1)*stride + (t_rh - 1)*dilation + 1
    sums = [str(c) for c in space.csp.constraints if str(c).startswith("SUM Y.Xp.d1@")]
    assert sums and all("2*Y.v_i0@" in s and "Y.v_rh@" in s and "-2" in s for s in sums)


def test_conv_footprint_is_never_underestimated():
    """For sampled assignments, the L1 footprint variable of the input covers what one R0
    iteration really touches (counted by enumerating the indices)."""
    from heronlike.sampler import RandSAT

    stride, dil = 2, 2
    space = generate_space(ops.c2d(1, 12, 12, 16, 32, 3, 3, stride, 2, dil), "dlboost")
    sampler = RandSAT(space.csp, seed=0)
    for a in sampler.sample(8):
        th, trh = a["Y.v_i0@R0"], a["Y.v_rh@R0"]
        touched = len({h * stride + r * dil for h in range(th) for r in range(trh)})
        assert a["Y.Xp.d1@R0"] >= touched


@pytest.mark.parametrize(
    "call",
    [
        lambda: ops.c2d(1, 2, 2, 16, 16, 3, 3),  # output 0 x 0
        lambda: ops.c2d(1, 8, 8, 16, 16, 3, 3, stride=0),
        lambda: ops.c2d(1, 8, 8, 16, 16, 3, 3, pad=-1),
        lambda: ops.c1d(0, 8, 16, 16, 3),
        lambda: ops.c3d(1, 2, 8, 8, 16, 16, 3, 3, 3),  # depth output 0
        lambda: ops.dil(1, 4, 4, 16, 16, 3, 3),  # dilated kernel 5 > 4
        lambda: ops.t2d(1, 4, 4, 16, 16, 3, 3, stride=2, output_padding=2),
        lambda: ops.t2d(1, 1, 1, 16, 16, 1, 1, pad=1),  # output -1
        lambda: ops.group_c2d(1, 8, 8, 16, 30, 3, 3, groups=4),
        lambda: ops.scan(16, 0, 16),
    ],
)
def test_argument_checks(call):
    with pytest.raises(InvalidComputeError):
        call()


def test_unknown_dtype():
    with pytest.raises(UnsupportedDtypeError):
        ops.c2d(1, 8, 8, 16, 16, 3, 3, dtype="int4")


def test_operator_table_and_flops():
    from heronlike.dag import ComputeDAG

    for name in ("c1d", "c2d", "c3d", "dil", "t2d", "group_c2d", "scan"):
        assert name in ops.OPERATORS
    dag = ComputeDAG.from_compute(ops.c2d(1, 8, 8, 16, 32, 3, 3, 1, 1))
    assert dag.flop() == 2 * 8 * 8 * 32 * 16 * 9  # the padding stage counts nothing
    dag = ComputeDAG.from_compute(ops.scan(16, 32, 8))
    assert dag.flop() == 2 * 16 * 32 * 8


def test_cli_takes_optional_conv_arguments():
    from click.testing import CliRunner

    from heronlike import cli

    res = CliRunner().invoke(cli.main, ["csp", "c2d", "--shape", "1,8,8,16,32,3,3,2,1"])
    assert res.exit_code == 0, res.output
    assert "Xp[" in res.output and "v_i0:S4" in res.output  # padded input, HO = 4 at stride 2
    res = CliRunner().invoke(cli.main, ["csp", "c2d", "--shape", "1,8,8"])
    assert res.exit_code == 2 and "c2d takes 7 to 10 arguments" in res.output
