"""Any shape on DL Boost: extents that VNNI's 16 × 4 tile does not divide are padded inside
the kernel (rules/pad.py), tuned for real and checked bit-exactly against numpy.

Nothing is mocked: every tune builds candidates in the worker pool and times them in the
isolated runner; timing repeats are kept small.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import te  # noqa: E402

import heronlike.dla_targets.dlboost as dlboost  # noqa: E402
from heronlike import ops, tune  # noqa: E402
from heronlike.errors import UnsupportedShapeError  # noqa: E402
from heronlike.rules.cache_stage import AddCacheStage  # noqa: E402
from heronlike.rules.inline import AlwaysInline, MaterializeOperand  # noqa: E402
from heronlike.rules.parallel import (  # noqa: E402
    ParallelizeOuter,
    UnrollDepth,
    UnrollRegisterTile,
)
from heronlike.rules.tensorize import ApplyIntrinsic, Tensorize  # noqa: E402
from heronlike.rules.tiling import MultiLevelTiling  # noqa: E402
from heronlike.space import generate_space  # noqa: E402

pytestmark = pytest.mark.skipif(not dlboost.host_has_vnni(), reason="host has no AVX512-VNNI")

FAST = dict(number=1, repeat=2, min_repeat_ms=0.0, final_repeat=2)


def _u8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 255, shape, dtype=np.uint8, endpoint=True)


def _s8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 127, shape, dtype=np.int8, endpoint=True)


def _gemm_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x.astype(np.int64) @ w.astype(np.int64).T


def _bmm_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.einsum("bmk,bnk->bmn", x.astype(np.int64), w.astype(np.int64))


def _gemv_ref(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) @ x.astype(np.int64)


CASES: list[tuple[str, Callable[[], list], tuple[tuple[int, ...], ...], Callable]] = [
    # N = 40 (not a multiple of 16), K = 20
    ("gemm_8x40x20", lambda: ops.gemm(8, 40, 20), ((8, 20), (40, 20)), _gemm_ref),
    # prime extents: N and K both padded, the output copied back from the padded result
    ("gemm_17x17x17", lambda: ops.gemm(17, 17, 17), ((17, 17), (17, 17)), _gemm_ref),
    # odd N in a batched product
    ("bmm_2x3x17x12", lambda: ops.bmm(2, 3, 17, 12), ((2, 3, 12), (2, 17, 12)), _bmm_ref),
    # odd M of a GEMV (the intrinsic's n axis), K = 19 (k axis)
    ("gemv_37x19", lambda: ops.gemv(37, 19), ((19,), (37, 19)), _gemv_ref),
]


@pytest.mark.parametrize(("name", "compute", "shapes", "ref"), CASES, ids=[c[0] for c in CASES])
def test_odd_shapes_tune_and_are_exact(
    tmp_path: Path,
    name: str,
    compute: Callable[[], list],
    shapes: tuple[tuple[int, ...], ...],
    ref: Callable,
) -> None:
    result = tune(
        compute(), "dlboost", trials=4, batch_size=4, seed=0, records=tmp_path / "r.sqlite", **FAST
    )
    assert result.trials_run >= 1 and result.invalid == 0, result.errors
    assert result.correct is True
    assert result.space is not None
    steps = [s.op for s in result.space.template.steps]
    assert "pad_einsum" in steps and "tensorize" in steps
    # the weight is zero-padded to the tile multiples with its one-time pre-packing: the
    # kernel's weight parameter has the padded shape, the activation is padded in the kernel
    space = result.space
    (weight,) = space.packed
    logical = next(p.shape for p in space.dag.params if p.name == weight)
    kernel = next(
        tuple(int(d) for d in p.shape) for p in space.template.func.params if p.name == weight
    )
    assert all(k % t == 0 for k, t in zip(kernel, space.packed[weight].tiles))
    assert kernel != logical and all(k >= d for k, d in zip(kernel, logical))
    # FLOP count of the compute as written, not of the padded problem
    assert result.flop == result.space.dag.flop()
    rng = np.random.default_rng(2024)
    a, b = _u8(rng, shapes[0]), _s8(rng, shapes[1])
    out = result.kernel(a, b)
    assert out.dtype == np.int32
    assert np.array_equal(out.astype(np.int64), ref(a, b))
    # extremes: every product at its largest magnitude
    a = np.full(shapes[0], 255, np.uint8)
    b = np.full(shapes[1], -128, np.int8)
    assert np.array_equal(result.kernel(a, b).astype(np.int64), ref(a, b))


class _IntrinsicOnly(dlboost.DLBoostTarget):
    """DL Boost with the rule list from before padding and the general rules existed.

    The loop-order and unroll-depth knobs (issue 13) are part of the intrinsic rules since.
    """

    names = ("dlboost_intrinsic_only",)

    def schedule_rules(self):  # noqa: ANN201
        v = dlboost.VECTOR_BYTES
        return (
            AlwaysInline(),
            MaterializeOperand(vector_bytes=v),
            Tensorize(),
            AddCacheStage(scope="global"),
            MultiLevelTiling(vector_level="V", order_level="S1"),
            ParallelizeOuter(),
            UnrollRegisterTile(),
            UnrollDepth(),
            ApplyIntrinsic(vector_bytes=v),
        )


@pytest.mark.parametrize(
    "compute",
    [lambda: ops.gemm(1024, 1024, 1024), lambda: ops.bmm(2, 64, 48, 128), lambda: ops.gemv(64, 96)],
    ids=["gemm1024", "bmm", "gemv"],
)
def test_divisible_shape_space_is_unchanged(compute: Callable[[], list]) -> None:
    """The padding and general rules add nothing to a shape the intrinsic divides."""
    now = generate_space(compute(), dlboost.DLBoostTarget(**{"num-cores": "2"}))
    before = generate_space(compute(), _IntrinsicOnly(**{"num-cores": "2"}))
    assert "pad_einsum" not in str(now.template)
    assert str(now.template).replace("_intrinsic_only", "") == str(before.template)
    assert str(now.csp) == str(before.csp)
    assert set(now.csp.vars) == set(before.csp.vars)
    assert now.csp.knobs == before.csp.knobs
    assert now.packed == before.packed and set(now.packed) == {now.dag.params[1].name}


def test_padded_space_extents() -> None:
    """N = 1000 is tiled as 1008 (63 tiles of 16); K = 17 as 20; M (m = 1) is not padded."""
    space = generate_space(ops.gemm(24, 1000, 17), dlboost.DLBoostTarget(**{"num-cores": "2"}))
    assert "sch.pad_einsum(b_C, [1, 16, 4])" in str(space.template)
    stage = next(st for st in space.nests)
    csp = space.csp
    assert csp.vars[f"{stage}.v_j.T"].hi == 1008 and csp.vars[f"{stage}.v_k.T"].hi == 20
    assert csp.vars[f"{stage}.v_i.S0"].hi == 24
    # the copy-out of the valid region is attached in the tile loops, like a write-back
    assert "reverse_compute_at(b_C_pad" in str(space.template)


def _strided_rows(N: int) -> list[te.Tensor]:
    """``Y[i, j] = sum_k X[2i, k] * W[j, k]``: the intrinsic matches (j, k plain) but TVM's
    ``pad_einsum`` cannot pad a stage whose access is not plain."""
    X = te.placeholder((16, 32), "uint8", name="X")
    W = te.placeholder((N, 32), "int8", name="W")
    k = te.reduce_axis((0, 32), name="k")
    Y = te.compute(
        (8, N),
        lambda i, j: te.sum(X[2 * i, k].astype("int32") * W[j, k].astype("int32"), axis=k),
        name="Y",
    )
    return [X, W, Y]


def test_unpaddable_stage_raises_a_typed_error() -> None:
    with pytest.raises(UnsupportedShapeError, match="cannot be padded.*dlboost -general"):
        generate_space(_strided_rows(20), "dlboost")
    # with the general rule set, the stage is tuned without the intrinsic instead
    space = generate_space(_strided_rows(20), "dlboost -general")
    assert "tensorize" not in str(space.template) and space.matches == {}


def test_weight_padded_inside_the_kernel_when_the_signature_cannot_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback: the weight is padded and packed by a producer block inside the measured
    kernel (packed iteration order, one vector store per 16 x 4 tile)."""
    import heronlike.rules.pad as pad

    monkeypatch.setattr(pad, "with_param_shape", lambda *args: None)
    result = tune(
        ops.gemm(8, 40, 20), "dlboost", trials=4, batch_size=4, records=tmp_path / "r", **FAST
    )
    assert result.invalid == 0 and result.correct is True, result.errors
    assert result.space.packed == {}
    text = str(result.space.template)
    assert "sch.vectorize(W_pad.tile)" in text and "sch.parallel(W_pad.tiles)" in text
    rng = np.random.default_rng(11)
    x, w = _u8(rng, (8, 20)), _s8(rng, (40, 20))
    assert np.array_equal(result.kernel(x, w).astype(np.int64), _gemm_ref(x, w))
