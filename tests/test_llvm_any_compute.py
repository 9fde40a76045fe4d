"""``target="llvm"`` (and ``"x86"``) tunes any compute TVM can build, with no option.

``llvm`` is ``dlboost -general`` (same class, same space, same records key): stages VNNI runs
are tensorized where ``-mcpu`` has AVX512-VNNI, every other stage goes to the general rule set;
``dlboost`` stays strict. The VNNI code paths are checked here without a VNNI CPU through an
explicit ``-mcpu`` (spaces and builds, not runs).

The float32 workloads are what a TVM user writes (``heronlike.ops`` where it has them, plain TE
otherwise); each is tuned for real and its best kernel checked against TVM's unscheduled build
of the same compute.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from tvm import te, tirx  # noqa: E402

import heronlike.dla_targets.dlboost as dlboost  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo: benchmarks.*
from benchmarks.llvm_float32 import conv2d_bias_relu, conv2d_nchw, softmax  # noqa: E402
from benchmarks.llvm_float32 import layer_norm as bench_layer_norm  # noqa: E402
from heronlike import ops, tune  # noqa: E402
from heronlike.errors import (  # noqa: E402
    HeronlikeError,
    HostFeatureError,
    UnsupportedComputeError,
    UnsupportedDtypeError,
)
from heronlike.host import cpu_flags  # noqa: E402
from heronlike.rules.rows import FuseIntoRow, ParallelizeReduction  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import generate_space  # noqa: E402
from heronlike.target import get_target  # noqa: E402

FAST = dict(number=1, repeat=2, min_repeat_ms=0.0, final_repeat=2)
VNNI_CPU = "cascadelake"  # an LLVM CPU with AVX512-VNNI, for the VNNI paths on any host


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


# -- workloads, as a TVM user writes them ---------------------------------------------------------


def layer_norm(M: int, N: int, eps: float = 1e-5) -> list[te.Tensor]:
    X = te.placeholder((M, N), "float32", name="X")
    gamma = te.placeholder((N,), "float32", name="gamma")
    beta = te.placeholder((N,), "float32", name="beta")
    k = te.reduce_axis((0, N), name="k")
    mean = te.compute((M,), lambda i: te.sum(X[i, k] / N, axis=k), name="mean")
    k2 = te.reduce_axis((0, N), name="k2")
    var = te.compute(
        (M,), lambda i: te.sum((X[i, k2] - mean[i]) * (X[i, k2] - mean[i]) / N, axis=k2), name="var"
    )
    Y = te.compute(
        (M, N),
        lambda i, j: (X[i, j] - mean[i]) * te.rsqrt(var[i] + eps) * gamma[j] + beta[j],
        name="Y",
    )
    return [X, gamma, beta, Y]


def transpose(M: int, N: int) -> list[te.Tensor]:
    X = te.placeholder((M, N), "float32", name="X")
    return [X, te.compute((N, M), lambda i, j: X[j, i], name="Y")]


WORKLOADS: dict[str, Any] = {
    "matmul": lambda: ops.gemm(48, 64, 40, "float32"),
    "bmm": lambda: ops.bmm(3, 32, 48, 24, "float32"),
    "conv1d": lambda: ops.c1d(1, 30, 16, 32, 3, 1, 1, 1, dtype="float32"),
    "conv2d_nhwc": lambda: ops.c2d(1, 10, 10, 16, 32, 3, 3, 1, 1, dtype="float32"),
    "conv2d_nchw": lambda: conv2d_nchw(1, 16, 10, 10, 32, 3, 1),
    "conv3d": lambda: ops.c3d(1, 4, 6, 6, 8, 16, 3, 3, 3, 1, 1, dtype="float32"),
    "depthwise_conv2d": lambda: ops.depthwise_c2d(1, 10, 10, 32, 3, 3, 2, 1, dtype="float32"),
    "transposed_conv2d": lambda: ops.t2d(1, 6, 6, 8, 16, 3, 3, 2, 1, 1, 1, dtype="float32"),
    "softmax": lambda: softmax(24, 96),
    "layer_norm": lambda: layer_norm(24, 96),
    "conv2d_bias_relu": lambda: conv2d_bias_relu(1, 10, 10, 16, 32, 3, 1),
    "transpose": lambda: transpose(40, 24),
    "float16_matmul": lambda: ops.gemm(32, 48, 64, "float16"),
}


def unscheduled(compute: list[te.Tensor], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of TVM's unscheduled build of ``compute`` (its default schedule)."""
    func = te.create_prim_func(compute)
    lib = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    outs = [t for t in compute if not isinstance(t.op, te.PlaceholderOp)]
    arrays = [tvm.runtime.tensor(a) for a in inputs]
    arrays += [tvm.runtime.tensor(np.zeros([int(d) for d in t.shape], str(t.dtype))) for t in outs]
    lib["main"](*arrays)
    return [a.numpy() for a in arrays[len(inputs) :]]


def random_inputs(compute: list[te.Tensor], seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(str(t.dtype))
        for t in compute
        if isinstance(t.op, te.PlaceholderOp)
    ]


# -- llvm / x86 vs dlboost: names, keys, strictness ------------------------------------------------


def test_llvm_is_dlboost_general() -> None:
    general = get_target("dlboost -general -num-cores=2")
    for spec in ("llvm -num-cores=2", "x86 -num-cores=2", {"kind": "llvm", "num-cores": 2}):
        t = get_target(spec)
        assert isinstance(t, dlboost.DLBoostTarget)
        assert t.general and not t.requires_intrinsic
        assert t.key == general.key and "-general" in t.key  # one space, one records key
    strict = get_target("dlboost -num-cores=2")
    assert strict.requires_intrinsic and "-general" not in strict.key
    assert get_target("llvm -general=0 -num-cores=2").key == strict.key
    # the strict rule set is the one its records were tuned with
    assert not any(
        isinstance(r, FuseIntoRow | ParallelizeReduction) for r in strict.schedule_rules()
    )


def test_dlboost_stays_strict_and_names_llvm() -> None:
    with pytest.raises(UnsupportedDtypeError, match='target "llvm"'):
        generate_space(ops.gemm(16, 32, 16, "float32"), "dlboost")


def test_llvm_on_this_cpu() -> None:
    """With AVX512-VNNI an int8 GEMM is tensorized onto VNNI; without it (e.g. this AVX2
    Zen 3) onto vpmaddwd where the CPU has AVX2, and the key names the general rule set.
    Either way ``llvm`` can measure."""
    t = get_target("llvm")
    expected = (
        (dlboost.VNNI,)
        if dlboost.host_has_vnni()
        else (dlboost.PMADDWD_AVX512_A16,)
        if "avx512bw" in cpu_flags()
        else (dlboost.PMADDWD_AVX2_A16,)
        if "avx2" in cpu_flags()
        else ()
    )
    assert t.intrinsics == expected
    assert "-general" in t.key and f"-mcpu={dlboost.host_cpu()}" in t.key
    t.check_host()  # no HostFeatureError on the host's own CPU
    space = generate_space(ops.gemm(64, 64, 64, "int8"), "llvm")
    ops_used = {s.op for s in space.template.steps}
    assert ("tensorize" in ops_used) == bool(expected)


def test_vector_width_follows_mcpu() -> None:
    assert get_target(f"llvm -mcpu={VNNI_CPU}").vector_bytes == 64
    assert get_target("llvm -mcpu=haswell").vector_bytes == 32
    assert get_target("llvm -mcpu=haswell").memory_level("register").capacity_bytes == 16 * 32
    assert get_target("dlboost -mcpu=haswell").vector_bytes == 64  # strict: unchanged
    space = generate_space(ops.gemm(16, 48, 24, "float32"), "llvm -mcpu=haswell")
    for a in RandSAT(space.csp, seed=1).sample(16):
        assert a["C.v_j.V"] <= 8  # one 256-bit register of float32


def test_vnni_cpu_tensorizes_int8_and_generalizes_the_rest() -> None:
    """On a VNNI CPU (named by -mcpu, so this runs anywhere): an int8 GEMM gets exactly
    ``dlboost``'s space, a float32 compute the general rule set, a mixed compute both."""
    llvm = get_target(f"llvm -mcpu={VNNI_CPU} -num-cores=2")
    assert llvm.intrinsics == (dlboost.VNNI,) and not llvm.requires_intrinsic
    int8 = ops.gemm(32, 64, 32, "int8")
    strict = generate_space(int8, f"dlboost -mcpu={VNNI_CPU} -num-cores=2")
    space = generate_space(int8, llvm)
    assert str(space.template) == str(strict.template) and str(space.csp) == str(strict.csp)
    assert "tensorize" in [s.op for s in space.template.steps]
    fp32 = generate_space(softmax(8, 64), llvm)
    assert "tensorize" not in str(fp32.template) and "row_reduction" in str(fp32.template)
    # int8 GEMM, then a float32 row softmax of its result: VNNI for the GEMM, rows for the rest
    X, W, C = int8
    F = te.compute(C.shape, lambda i, j: C[i, j].astype("float32") * 0.01, name="F")
    mixed = [X, W, *softmax_of(F)]
    text = str(generate_space(mixed, llvm).template)
    assert "tensorize" in text and "row_reduction" in text
    # strict dlboost accepts it too (a stage maps onto VNNI), with the rules it always had:
    # no row stages, and the element-wise output a single program (no vector/unroll knobs)
    strict = generate_space(mixed, f"dlboost -mcpu={VNNI_CPU}")
    assert "row_reduction" not in str(strict.template)
    assert not [v for v in strict.csp.vars.values() if v.knob and v.name.startswith("Y.")]
    general = generate_space(mixed, llvm)
    assert {"Y.vec", "Y.unroll", "S.rf", "mx.rf"} <= set(general.csp.vars)


def softmax_of(X: te.Tensor) -> list[te.Tensor]:
    M, N = (int(d) for d in X.shape)
    k = te.reduce_axis((0, N), name="k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="mx")
    E = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="E")
    k2 = te.reduce_axis((0, N), name="k2")
    S = te.compute((M,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    return [te.compute((M, N), lambda i, j: E[i, j] / S[i], name="Y")]


def test_vnni_cpu_candidates_build() -> None:
    """Candidates for a VNNI CPU compile here (LLVM cross-compiles; running needs the CPU)."""
    llvm = get_target(f"llvm -mcpu={VNNI_CPU} -num-cores=2")
    for compute in (ops.gemm(32, 64, 32, "int8"), softmax(8, 64)):
        space = generate_space(compute, llvm)
        (a,) = RandSAT(space.csp, seed=3).sample(1)
        lib = tvm.compile(space.program(a), target=tvm.target.Target(llvm.tvm_target()))
        assert lib is not None


@pytest.mark.skipif(
    dlboost.host_has_vnni() and "avx512f" in _cpu_flags(), reason="host runs AVX-512 kernels"
)
def test_llvm_with_an_mcpu_this_cpu_cannot_run() -> None:
    with pytest.raises(HostFeatureError, match=f"-mcpu={VNNI_CPU}.*avx512"):
        get_target(f"llvm -mcpu={VNNI_CPU}").check_host()


# -- the general rule set on a TVM user's float32 workloads --------------------------------------


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_tunes_and_matches_tvm(name: str, tmp_path: Path) -> None:
    compute = WORKLOADS[name]()
    result = tune(compute, "llvm", trials=8, batch_size=8, seed=0, records=tmp_path / "r", **FAST)
    assert result.valid == result.trials_run > 0, result.errors
    assert result.correct is True
    inputs = random_inputs(compute)
    got = result.kernel(*inputs)
    (want,) = unscheduled(compute, inputs)
    tol = 5e-2 if want.dtype == np.float16 or name.startswith("float16") else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_row_stages_are_fused_and_vectorized() -> None:
    """Softmax: max, exp and sum are computed per row under the output's parallel loop (exp
    once, not inlined into both consumers), the reductions vectorised through rfactor."""
    space = generate_space(softmax(16, 64), "llvm -mcpu=haswell -num-cores=2")
    text = str(space.template)
    assert "sch.parallel(Y.v_i)" in text
    assert (
        "sch.row_reduction(b_S, Y.v_i, $S.rf)" in text
        and "sch.row_reduction(b_mx, Y.v_i, $mx.rf)" in text
    )
    assert "sch.compute_at(b_E, Y.v_i)" in text and "compute_inline(b_E)" not in text
    script = space.apply({"S.rf": 8, "mx.rf": 16, "Y.vec": 8, "Y.unroll": 0}).mod.script()
    assert "S_rf" in script and "mx_rf" in script
    assert "T.vectorized(8)" in script and "T.vectorized(16)" in script
    # a reduction no output row holds (a column sum) is parallel over its own outputs
    X = te.placeholder((64, 48), "float32", name="X")
    r = te.reduce_axis((0, 64), name="r")
    col = te.compute((48,), lambda j: te.sum(X[r, j], axis=r), name="col")
    text = str(generate_space([X, col], "llvm").template)
    assert "sch.row_reduction(b_col, None" in text


def test_layer_norm_template() -> None:
    text = str(generate_space(layer_norm(8, 64), "llvm").template)
    assert "row_reduction(b_mean, Y.v_i" in text and "row_reduction(b_var, Y.v_i" in text


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layer_norm_np(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + 1e-5) * gamma + beta


NO_AVX2 = pytest.mark.skipif("avx2" not in _cpu_flags(), reason="runs -mcpu=haswell kernels")


@NO_AVX2
@pytest.mark.parametrize(
    ("build", "reference", "knobs"),
    [
        (lambda: softmax(16, 128), _softmax_np, {"mx.rf", "S.rf", "Y.vec", "Y.unroll"}),
        (lambda: layer_norm(16, 128), _layer_norm_np, {"mean.rf", "var.rf", "Y.vec", "Y.unroll"}),
        (lambda: bench_layer_norm(16, 128), _layer_norm_np, {"s.rf", "sq.rf", "Y.vec", "Y.unroll"}),
    ],
    ids=["softmax", "layer_norm", "layer_norm_moments"],
)
def test_row_computes_have_a_space(build: Any, reference: Any, knobs: set[str]) -> None:
    """Row-wise computes get knobs (rfactor width per reduction, vector width and unroll depth
    of the output's row loop), more than one valid program, and every sampled program computes
    what numpy does."""
    compute = build()
    llvm = get_target("llvm -mcpu=haswell -num-cores=2")  # AVX2: 8 float32 lanes on any x86
    space = generate_space(compute, llvm)
    assert {v.name for v in space.csp.vars.values() if v.knob} == knobs
    assert space.csp.candidates("Y.vec") == (8, 16, 32)
    assert all(space.csp.candidates(k) == (8, 16, 32, 64) for k in knobs if k.endswith(".rf"))
    samples = RandSAT(space.csp, seed=5).sample(6)
    assert len({tuple(sorted(a.items())) for a in samples}) == 6
    inputs = random_inputs(compute)
    want = reference(*inputs)
    target = tvm.target.Target(llvm.tvm_target())
    for a in samples:
        assert not space.csp.violations(a)
        lib = tvm.compile(space.program(a), target=target)
        args = [tvm.runtime.tensor(x) for x in inputs]
        out = tvm.runtime.tensor(np.full(want.shape, np.nan, "float32"))
        lib["main"](*args, out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=str(a))


def _depthwise_np(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """NHWC depthwise conv2d, stride 1: ``x (N, H, W, C)``, ``w (C, KH, KW)``."""
    xp = np.pad(x.astype(np.float64), [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    _, kh, kw = w.shape
    ho, wo = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    out = np.zeros((x.shape[0], ho, wo, x.shape[3]))
    for rh in range(kh):
        for rw in range(kw):
            out += xp[:, rh : rh + ho, rw : rw + wo, :] * w[:, rh, rw]
    return out


@NO_AVX2
def test_depthwise_samples_match_numpy() -> None:
    """Depthwise conv2d (a per-channel stencil): tiled with the vector level on the channels,
    the weight packed channels-innermost; sampled programs compute what numpy does."""
    compute = ops.depthwise_c2d(1, 12, 12, 32, 3, 3, 1, 1, dtype="float32")
    llvm = get_target("llvm -mcpu=haswell -num-cores=2")
    space = generate_space(compute, llvm)
    assert "W" in space.packed  # Wt[c, rh, rw] stored channels-innermost
    samples = RandSAT(space.csp, seed=2).sample(4)
    assert len({tuple(sorted(a.items())) for a in samples}) == 4
    x, w = random_inputs(compute)
    want = _depthwise_np(x, w, pad=1)
    target = tvm.target.Target(llvm.tvm_target())
    for a in samples:
        assert a["Y.v_ch.V"] <= 8
        lib = tvm.compile(space.program(a), target=target)
        poisoned = np.full(want.shape, np.nan, "float32")
        args = [tvm.runtime.tensor(v) for v in space.prepare_args([x, w, poisoned])]
        lib["main"](*args)
        np.testing.assert_allclose(args[-1].numpy(), want, rtol=1e-4, atol=1e-5, err_msg=str(a))


def test_scalar_reduction(tmp_path: Path) -> None:
    X = te.placeholder((64, 48), "float32", name="X")
    i, j = te.reduce_axis((0, 64), name="i"), te.reduce_axis((0, 48), name="j")
    total = te.compute((), lambda: te.sum(X[i, j], axis=[i, j]), name="total")
    result = tune([X, total], "llvm", trials=1, records=tmp_path / "r", **FAST)
    assert result.valid == 1 and result.correct is True


# -- what the general rule set cannot do: typed errors naming the stage ----------------------------


def _argmax() -> list[te.Tensor]:
    X = te.placeholder((8, 16), "float32", name="X")

    def combine(x: Any, y: Any) -> Any:
        keep = x[1] >= y[1]
        return tirx.Select(keep, x[0], y[0]), tirx.Select(keep, x[1], y[1])

    def identity(t0: Any, t1: Any) -> Any:
        return tirx.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(combine, identity, name="argmax")
    k = te.reduce_axis((0, 16), name="k")
    idx, val = te.compute((8,), lambda i: argmax((k, X[i, k]), axis=k), name="T")
    return [X, idx, val]


def _gather() -> list[te.Tensor]:
    X = te.placeholder((64, 48), "float32", name="X")
    ids = te.placeholder((16,), "int32", name="ids")
    return [X, ids, te.compute((16, 48), lambda i, j: X[ids[i], j], name="rows")]


def _extern() -> list[te.Tensor]:
    X = te.placeholder((16,), "float32", name="X")
    Y = te.extern((16,), [X], lambda ins, outs: tirx.call_packed("f", ins[0], outs[0]), name="ext")
    return [X, Y]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (_argmax, "stage T writes several buffers"),
        (_gather, "stage rows indexes X with values loaded from ids"),
        (_extern, "not TE stages under one root block"),
    ],
    ids=["argmax", "gather", "extern"],
)
def test_unschedulable_compute_is_a_typed_error(build: Any, match: str, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedComputeError, match=match) as info:
        tune(build(), "llvm", trials=1, records=tmp_path / "r")
    assert isinstance(info.value, HeronlikeError)
    assert not (tmp_path / "r").exists()
