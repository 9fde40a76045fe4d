"""ComputeDAG: stages, axes, accesses, the multiply-accumulate pattern and input validation.

Real TE computes from :mod:`heronlike.ops` (and a two-stage GEMM + ReLU) analysed by TVM's own
``te.create_prim_func``; nothing is mocked.
"""

from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm")

from tvm import te, tirx  # noqa: E402

from heronlike import ops  # noqa: E402
from heronlike.dag import Axis, ComputeDAG  # noqa: E402
from heronlike.errors import InvalidComputeError  # noqa: E402


def _axes(stage) -> list[tuple[str, int, str]]:
    return [(a.name, a.extent, a.kind) for a in stage.axes]


def _gemm_relu(M: int = 64, N: int = 64, K: int = 64) -> list[te.Tensor]:
    X, W, C = ops.gemm(M, N, K)
    R = te.compute(C.shape, lambda i, j: te.max(C[i, j], tirx.const(0, "int32")), name="R")
    return [X, W, R]


# -- single-stage computes -------------------------------------------------------------------------


def test_gemm_stage_axes_accesses_and_mac() -> None:
    dag = ComputeDAG.from_compute(ops.gemm(128, 64, 32))
    assert [p.name for p in dag.params] == ["X", "W", "C"]
    assert [(p.shape, p.dtype) for p in dag.params] == [
        ((128, 32), "uint8"),
        ((64, 32), "int8"),
        ((128, 64), "int32"),
    ]
    assert dag.outputs == ("C",)
    assert [s.name for s in dag.stages] == ["C"]
    st = dag.stage("C")
    assert _axes(st) == [("v_i", 128, "S"), ("v_j", 64, "S"), ("v_k", 32, "R")]
    assert st.axis("v_k") == Axis("v_k", 32, "R")
    with pytest.raises(KeyError):
        st.axis("nope")
    # which axis indexes which buffer dimension
    assert (st.write.buffer, st.write.axes, st.write.dtype) == ("C", ("v_i", "v_j"), "int32")
    reads = {r.buffer: r for r in st.reads}
    assert set(reads) == {"X", "W"}  # the accumulator C is not an input
    assert reads["X"].axes == ("v_i", "v_k") and reads["X"].shape == (128, 32)
    assert reads["W"].axes == ("v_j", "v_k") and reads["W"].shape == (64, 32)
    assert reads["X"].itemsize == 1 and st.write.itemsize == 4
    assert all(r.is_plain for r in st.reads)
    # C[i, j] += cast(X[i, k]) * cast(W[j, k])
    assert st.mac is not None
    assert (st.mac.out.buffer, st.mac.a.buffer, st.mac.b.buffer) == ("C", "X", "W")
    assert st.mac.a.axes == ("v_i", "v_k") and st.mac.b.axes == ("v_j", "v_k")
    assert st.is_reduction and not st.is_injective and st.is_output
    assert st.has_data_reuse  # X is not indexed by j, W not by i
    assert dag.flop() == 2 * 128 * 64 * 32
    assert dag.post_order() == ["C"]
    assert dag.producers("C") == [] and dag.consumers("C") == []
    assert "multiply-accumulate" in dag.describe()
    assert "v_k:R32" in dag.describe()


def test_bmm_stage_has_batch_axis_in_every_access() -> None:
    dag = ComputeDAG.from_compute(ops.bmm(3, 32, 48, 16))
    st = dag.stage("C")
    assert _axes(st) == [("v_b", 3, "S"), ("v_i", 32, "S"), ("v_j", 48, "S"), ("v_k", 16, "R")]
    reads = {r.buffer: r.axes for r in st.reads}
    assert reads == {"X": ("v_b", "v_i", "v_k"), "W": ("v_b", "v_j", "v_k")}
    assert st.write.axes == ("v_b", "v_i", "v_j")
    assert st.mac is not None and st.mac.a.buffer == "X" and st.mac.b.buffer == "W"
    assert st.has_data_reuse
    assert st.streamed_reads == ()
    # one row per batch: no output tile reuses W any more (an axis of extent 1 reuses nothing)
    assert ComputeDAG.from_compute(ops.bmm(3, 1, 48, 16)).stage("C").streamed_reads == ("W",)
    assert dag.flop() == 2 * 3 * 32 * 48 * 16


def test_gemv_stage() -> None:
    dag = ComputeDAG.from_compute(ops.gemv(256, 128))
    assert [p.name for p in dag.params] == ["x", "A", "y"]
    st = dag.stage("y")
    assert _axes(st) == [("v_i", 256, "S"), ("v_k", 128, "R")]
    reads = {r.buffer: r.axes for r in st.reads}
    assert reads == {"x": ("v_k",), "A": ("v_i", "v_k")}
    assert st.write.axes == ("v_i",)
    assert st.mac is not None and (st.mac.a.buffer, st.mac.b.buffer) == ("x", "A")
    assert st.has_data_reuse  # x is reused across every i
    assert st.streamed_reads == ("A",)  # each element of A is read by one output only
    assert dag.flop() == 2 * 256 * 128


def test_elementwise_stage_has_no_mac_and_no_reuse() -> None:
    A = te.placeholder((64, 64), "int32", name="A")
    B = te.placeholder((64, 64), "int32", name="B")
    C = te.compute((64, 64), lambda i, j: A[i, j] + B[i, j], name="C")
    dag = ComputeDAG.from_compute([A, B, C])
    st = dag.stage("C")
    assert st.mac is None
    assert not st.is_reduction and st.is_injective and not st.has_data_reuse
    assert dag.flop() == 64 * 64


# -- two stages ------------------------------------------------------------------------------------


def test_two_stage_post_order_is_output_first() -> None:
    dag = ComputeDAG.from_compute(_gemm_relu(64, 32, 16))
    assert dag.outputs == ("R",)
    assert sorted(dag.graph.nodes) == ["C", "R"]
    assert list(dag.graph.edges) == [("C", "R")]
    assert dag.post_order() == ["R", "C"]  # consumer before producer (Heron Algorithm 1)
    assert dag.producers("R") == ["C"] and dag.consumers("C") == ["R"]
    c, r = dag.stage("C"), dag.stage("R")
    assert c.mac is not None and not c.is_output
    assert r.mac is None and r.is_output and r.is_injective and not r.has_data_reuse
    assert {a.buffer: a.axes for a in r.reads} == {"C": ("v_i", "v_j")}
    assert dag.flop() == 2 * 64 * 32 * 16 + 64 * 32


# -- other inputs and the workload key ------------------------------------------------------------


def test_primfunc_and_irmodule_inputs() -> None:
    func = te.create_prim_func(ops.gemm(64, 64, 64))
    from_func = ComputeDAG.from_compute(func)
    from_mod = ComputeDAG.from_compute(tvm.IRModule({"main": func}))
    from_list = ComputeDAG.from_compute(ops.gemm(64, 64, 64))
    for dag in (from_func, from_mod):
        assert dag.outputs == ("C",)
        assert [p.name for p in dag.params] == ["X", "W", "C"]
        assert dag.stage("C").mac is not None
        assert dag.workload_key == from_list.workload_key
    # a two-stage PrimFunc: only the written parameter is an output
    two = ComputeDAG.from_compute(te.create_prim_func(_gemm_relu()))
    assert two.outputs == ("R",) and two.post_order() == ["R", "C"]


def test_workload_key_is_stable_and_shape_sensitive() -> None:
    a = ComputeDAG.from_compute(ops.gemm(128, 128, 128))
    b = ComputeDAG.from_compute(ops.gemm(128, 128, 128))
    assert a.workload_key == b.workload_key
    assert len(a.workload_key) == 16 and int(a.workload_key, 16) >= 0
    others = [
        ops.gemm(128, 128, 64),
        ops.gemm(64, 128, 128),
        ops.gemm(128, 128, 128, "float32"),
        ops.bmm(1, 128, 128, 128),
    ]
    keys = {ComputeDAG.from_compute(c).workload_key for c in others}
    assert a.workload_key not in keys and len(keys) == len(others)
    assert a.text == b.text and "T.prim_func" in a.text


# -- invalid computes ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (-1, 4)])
def test_non_positive_extent_is_rejected(shape: tuple[int, int]) -> None:
    A = te.placeholder(shape, "float32", name="A")
    B = te.compute(shape, lambda i, j: A[i, j] + 1.0, name="B")
    with pytest.raises(InvalidComputeError, match="non-positive"):
        ComputeDAG.from_compute([A, B])


def test_non_positive_extent_in_primfunc_is_rejected() -> None:
    A = te.placeholder((0, 4), "float32", name="A")
    B = te.compute((0, 4), lambda i, j: A[i, j] + 1.0, name="B")
    with pytest.raises(InvalidComputeError, match="non-positive"):
        ComputeDAG.from_compute(te.create_prim_func([A, B]))


@pytest.mark.parametrize(
    "make",
    [
        lambda: ops.gemm(0, 64, 64),
        lambda: ops.gemm(64, -16, 64),
        lambda: ops.bmm(0, 16, 16, 16),
        lambda: ops.gemv(64, 0),
    ],
)
def test_ops_reject_non_positive_extents(make) -> None:  # noqa: ANN001
    with pytest.raises(InvalidComputeError, match="positive"):
        make()


def test_symbolic_extent_is_rejected() -> None:
    n = te.var("n")
    A = te.placeholder((n, 4), "float32", name="A")
    B = te.compute((n, 4), lambda i, j: A[i, j] + 1.0, name="B")
    with pytest.raises(InvalidComputeError, match="symbolic"):
        ComputeDAG.from_compute([A, B])


@pytest.mark.parametrize("compute", [[], (), None, "gemm", 42])
def test_empty_or_wrong_container_is_rejected(compute) -> None:  # noqa: ANN001
    with pytest.raises(InvalidComputeError):
        ComputeDAG.from_compute(compute)


def test_non_tensor_elements_are_rejected() -> None:
    X, W, C = ops.gemm(16, 16, 16)
    with pytest.raises(InvalidComputeError, match="not a te.Tensor"):
        ComputeDAG.from_compute([X, W, "C"])
    with pytest.raises(InvalidComputeError, match="not a te.Tensor"):
        ComputeDAG.from_compute([1, 2, 3])


def test_placeholders_only_is_rejected() -> None:
    X, W, _ = ops.gemm(16, 16, 16)
    with pytest.raises(InvalidComputeError, match="no output"):
        ComputeDAG.from_compute([X, W])


def test_invalid_compute_error_is_a_heronlike_value_error() -> None:
    import heronlike

    with pytest.raises(heronlike.HeronlikeError):
        ComputeDAG.from_compute([])
    with pytest.raises(ValueError):
        ComputeDAG.from_compute([])
