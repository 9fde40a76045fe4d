"""``benchmarks/gemv_stream.py`` and the rule options it turns on (``MultiLevelTiling``'s
``stream_order``, ``AddCacheStage``'s ``streamed``): they change a matrix-vector product only,
both orders compute the same, and every point has its three ways."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import gemv_stream  # noqa: E402
from heronlike import ops  # noqa: E402
from heronlike.csp import Eq  # noqa: E402
from heronlike.kernel import BuiltKernel  # noqa: E402
from heronlike.rules.tiling import MultiLevelTiling  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402


def _gemv_data(m: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, k, dtype=np.uint8)
    A = rng.integers(-128, 128, (m, k), dtype=np.int8)
    return x, A, A.astype(np.int64) @ x.astype(np.int64)


def test_the_streaming_order_is_a_knob_and_exact() -> None:
    """With the options on, a GEMV keeps its output as the accumulator (no write-back) and its
    knob ``y.stream`` puts the inner k loop (R1) below the unrolled row blocks (S2) at 1 only;
    DL Boost itself (``llvm``: vpmaddwd, any x86 CPU) leaves both off."""
    streaming, dlboost = gemv_stream.spaces(ops.gemv(256, 512), "llvm")
    assert streaming.csp.candidates("y.stream") == (0, 1)
    assert "cache_write" not in str(streaming.template)
    assert "y.stream" not in dlboost.csp.knobs and "cache_write" in str(dlboost.template)
    x, A, expected = _gemv_data(256, 512)
    for stream in (0, 1):
        for a in RandSAT(streaming.csp, seed=5).sample(2, extra=[Eq("y.stream", stream)]):
            sch = streaming.apply(a)
            block = sch.get_sblock("y_update_o")  # the tensorized update
            loops = [str(sch.get(lp).loop_var.name) for lp in sch.get_loops(block)]
            assert (loops.index("i_2") < loops.index("k_1")) == bool(stream), loops
            kernel = BuiltKernel(streaming, a, streaming.target.tvm_target())
            np.testing.assert_array_equal(kernel(x, A), expected)
    with pytest.raises(ValueError, match="no permutation"):
        MultiLevelTiling(stream_order=("S0", "S1", "R0", "R1", "T"))
    # a GEMM is tiled the same with the options on
    gemm = gemv_stream.spaces(ops.gemm(32, 32, 64), "llvm")
    assert str(gemm[0].template) == str(gemm[1].template)


def test_three_ways_keep_the_tile_and_compute_the_same() -> None:
    streaming, dlboost = gemv_stream.spaces(ops.gemv(64, 96), "llvm")
    x, A, expected = _gemv_data(64, 96)
    target = streaming.target.tvm_target()
    for point in RandSAT(streaming.csp, seed=2).sample(2):
        ways = gemv_stream.three_ways(point, streaming, dlboost)
        assert set(ways) == {"micro", "stream", "dlboost S0", "dlboost S1"}
        assert (ways["micro"]["y.stream"], ways["stream"]["y.stream"]) == (0, 1)
        for name, way in ways.items():
            assert all(way[k] == point[k] for k in streaming.csp.knobs if k != "y.stream")
            space = dlboost if name.startswith("dlboost") else streaming
            np.testing.assert_array_equal(BuiltKernel(space, way, target)(x, A), expected)


def test_a_given_point_is_named_by_its_knobs() -> None:
    streaming, _ = gemv_stream.spaces(ops.gemv(64, 96), "dlboost")
    point = gemv_stream.given_point("S0=2,S1=1,S2=2,R0=6,R1=4,unroll=0,serial=0", streaming)
    picked = (point["y.v_i.S2"], point["y.v_k.R1"], point["y.unroll"], point["y.stream"])
    assert picked == (2, 4, 0, 0)
    with pytest.raises(ValueError, match="names 0 knobs"):
        gemv_stream.given_point("S3=2", streaming)
    with pytest.raises(ValueError, match="no point"):
        gemv_stream.given_point("S0=3,S1=1,S2=2,R0=6,R1=4,unroll=0,serial=0", streaming)
