"""VTA requantisation epilogue (issue 10): ``heronlike.ops.requantize`` computes, their rules
(constants, accumulator and micro-op constraints), ALU lowering with one int8 store per tile,
bit-exact numerics (simulator and CPU TIR against numpy), the timing model's ALU accounting,
and tuning end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tvm import te, tirx

import heronlike
from heronlike import ops
from heronlike.dla_targets.vta import VTAConfig, simulate, time_program
from heronlike.dla_targets.vta.isa import AluInsn, AluOp, Engine, MemId, MemInsn, Opcode, engine_of
from heronlike.dla_targets.vta.lowering import (
    GemmParams,
    build_vta,
    gemm_int32_program,
    pack_bias,
    pack_inputs,
    unpack_output,
)
from heronlike.dla_targets.vta.runner import VTARunner
from heronlike.dla_targets.vta.timing import TimingParams, cost
from heronlike.errors import InvalidComputeError, UnsupportedComputeError, UnsupportedDtypeError
from heronlike.measure import RunInput
from heronlike.measure.kinds import ErrorKind
from heronlike.rules.vta import ALU_ADD, ALU_MAX, ALU_MIN, ALU_SHR, SRC_BIAS, SRC_IMM
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

S8 = ops.target_dtype("int8", "vta")


# -- numpy references -------------------------------------------------------------------------
def _acc(op: str, shape: tuple[int, ...], x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The int32 accumulator of ``op`` (``heronlike.ops`` argument order), exact, in numpy."""
    xi, wi = x.astype(np.int64), w.astype(np.int64)
    if op == "gemm":
        return (xi @ wi.T).astype(np.int32)
    if op == "bmm":
        return np.einsum("bmk,bnk->bmn", xi, wi).astype(np.int32)
    _, h, wd, _, co, kh, kw, s, p, d = shape
    xp = np.pad(xi, ((0, 0), (p, p), (p, p), (0, 0)))
    ho = (h + 2 * p - d * (kh - 1) - 1) // s + 1
    wo = (wd + 2 * p - d * (kw - 1) - 1) // s + 1
    out = np.zeros((1, ho, wo, co), np.int64)
    for r in range(kh):
        for c in range(kw):
            win = xp[:, r * d : r * d + s * (ho - 1) + 1 : s, c * d : c * d + s * (wo - 1) + 1 : s]
            out += np.einsum("nhwc,oc->nhwo", win, wi[:, r, c, :])
    return out.astype(np.int32)


def _requant(acc, bias, shift, clip, out_dtype):
    """``cast(clip((acc + bias) >> shift))`` with int32 wrap-around, as ``ops.requantize``."""
    x = acc.astype(np.int32)
    if bias is not None:
        x = x + bias.astype(np.int32)  # int32 arrays wrap
    x = x >> np.int32(shift)
    if clip is not None:
        x = np.maximum(np.minimum(x, clip[1]), clip[0])
    return x.astype(out_dtype)


def _data(op, shape, bias, seed=0, bias_range=1 << 14):
    """Operands, an in-range bias and the numpy accumulator."""
    rng = np.random.default_rng(seed)
    space_args = generate_space(ops.OPERATORS[op][0](*shape, dtype=S8), "vta").dag.params
    x = rng.integers(-128, 128, space_args[0].shape, dtype=np.int8)
    w = rng.integers(-128, 128, space_args[1].shape, dtype=np.int8)
    n = space_args[1].shape[-4 if op == "c2d" else -2]  # N or CO
    b = rng.integers(-bias_range, bias_range, (n,), dtype=np.int32) if bias else None
    return x, w, b, _acc(op, shape, x, w)


# -- the compute --------------------------------------------------------------------------------
def test_requantize_builds_one_epilogue_stage():
    compute = ops.requantize(ops.gemm(32, 48, 64, S8), 8, bias=True)
    assert [t.name for t in compute] == ["X", "W", "bias", "E"]
    assert compute[2].shape[0] == 48 and compute[2].dtype == "int32"
    assert compute[3].dtype == "int8" and [int(d) for d in compute[3].shape] == [32, 48]
    plain = ops.requantize(ops.c2d(1, 8, 8, 16, 32, 3, 3, 1, 1, dtype=S8), 0, clip=None)
    assert len(plain) == 3 and plain[-1].dtype == "int8"
    for bad, err in (
        (lambda: ops.requantize(ops.gemm(16, 16, 16, "float32"), 8), UnsupportedDtypeError),
        (
            lambda: ops.requantize(ops.gemm(16, 16, 16, S8), 8, out_dtype="uint8"),
            UnsupportedDtypeError,
        ),
        (lambda: ops.requantize(ops.gemm(16, 16, 16, S8), 32), InvalidComputeError),
        (lambda: ops.requantize(ops.gemm(16, 16, 16, S8), 8, clip=(5, 1)), InvalidComputeError),
        (lambda: ops.requantize([], 8), InvalidComputeError),
    ):
        with pytest.raises(err):
            bad()


def _custom(body, out_dtype="int8", n=32, extra_output=False, reduce_after=False):
    """``E = body(C, bias, i, j)`` after a 16 × n × 32 GEMM (two stages, the first inlined)."""
    X, W, C = ops.gemm(16, n, 32, S8)
    bias = te.placeholder((n,), "int32", name="bias")
    D = te.compute((16, n), lambda i, j: C[i, j] + 0, name="D")
    if reduce_after:
        r = te.reduce_axis((0, n), name="r")
        E = te.compute((16,), lambda i: te.sum(D[i, r], axis=r), name="E")
        return [X, W, bias, E]
    E = te.compute((16, n), lambda i, j: body(D, bias, i, j).astype(out_dtype), name="E")
    return [X, W, bias, C, E] if extra_output else [X, W, bias, E]


def test_epilogue_constants_in_the_space():
    """A user-written chain (two stages, a subtraction) is read as ALU operations in order."""
    space = generate_space(
        _custom(lambda D, b, i, j: tirx.max(tirx.min((b[j] + D[i, j] - 3) >> 4, 100), -7)),
        "vta",
    )
    v = {
        n: var.lo for n, var in space.csp.vars.items() if n.startswith("vta.") and var.lo == var.hi
    }
    assert v["vta.out_int8"] == 1 and v["vta.bias"] == 1 and v["vta.bias_arg"] == 2
    a = RandSAT(space.csp, seed=0).sample(1)[0]
    assert GemmParams.from_assignment(a).epilogue == (
        (ALU_ADD, 0, SRC_BIAS),
        (ALU_ADD, -3, SRC_IMM),
        (ALU_SHR, 4, SRC_IMM),
        (ALU_MIN, 100, SRC_IMM),
        (ALU_MAX, -7, SRC_IMM),
    )
    assert (ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR) == tuple(
        int(o) for o in (AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR)
    )


@pytest.mark.parametrize(
    ("compute", "error"),
    [
        (lambda: _custom(lambda D, b, i, j: D[i, j] * 3), UnsupportedComputeError),  # no MUL
        (lambda: _custom(lambda D, b, i, j: tirx.min(D[i, j], 1 << 20)), UnsupportedComputeError),
        (lambda: _custom(lambda D, b, i, j: D[i, j] >> b[j]), UnsupportedComputeError),
        (lambda: _custom(lambda D, b, i, j: D[i, j] + b[i]), UnsupportedComputeError),  # per row
        (lambda: _custom(lambda D, b, i, j: D[i, j] + D[i, 0]), UnsupportedComputeError),
        (lambda: _custom(lambda D, b, i, j: D[i, j] >> 8, "int16"), UnsupportedDtypeError),
        (
            lambda: _custom(lambda D, b, i, j: D[i, j] >> 8, extra_output=True),
            UnsupportedComputeError,
        ),
        (lambda: _custom(None, reduce_after=True), UnsupportedComputeError),
    ],
    ids=[
        "mul",
        "imm-range",
        "shift-by-tensor",
        "row-bias",
        "other-element",
        "int16",
        "two-outputs",
        "sum",
    ],
)
def test_unsupported_epilogues_are_typed_errors(compute, error):
    with pytest.raises(error):
        generate_space(compute(), "vta")


def test_bias_takes_accumulator_and_micro_op_space():
    """Every sampled point keeps ``vthreads · (tile_m·tile_n + tile_n)`` accumulators (the
    output tile and the bias tile) within the buffer and the bias kernel's ``tile_n``
    micro-ops within the micro-op buffer; the programs pass every simulator check. A tile
    that fills the accumulator buffer by itself has a schedule only without a bias."""
    from heronlike.csp import Eq
    from heronlike.errors import InfeasibleSpaceError

    cfg = VTAConfig()
    acc_depth, uop_depth = cfg.depth("ACC"), cfg.depth("UOP")
    compute = ops.requantize(ops.gemm(512, 256, 64, S8), 8, bias=True)
    space = generate_space(compute, "vta")
    samples = RandSAT(space.csp, seed=3).sample(30)
    sampled = [GemmParams.from_assignment(a) for a in samples]
    for a, p in zip(samples, sampled, strict=True):
        acc = p.vthreads * (p.tile_m + 1) * p.tile_n
        assert acc <= acc_depth and a["vta.acc_bytes"] == acc * cfg.elem_bytes("ACC")
        gemm_uops = p.tile_n if p.fold else p.tile_m * p.tile_n
        assert p.vthreads * (gemm_uops + p.tile_m * p.tile_n + p.tile_n) == a["vta.uops"]
        assert a["vta.uops"] <= uop_depth
    for p in sorted(sampled, key=lambda p: -p.vthreads * p.tile_m * p.tile_n)[:6]:
        time_program(gemm_int32_program(p))  # raises on any simulator check (the fullest)
    # 128 rows × 16 column blocks = the 2048 accumulators of the buffer (folded: few uops)
    full = (Eq("vta.tile_m", 128), Eq("vta.tile_n", 16), Eq("vta.vthreads", 1), Eq("vta.fold", 1))
    without = generate_space(ops.requantize(ops.gemm(512, 256, 64, S8), 8), "vta")
    assert RandSAT(without.csp, seed=0).sample(1, extra=full)
    with pytest.raises(InfeasibleSpaceError):
        RandSAT(space.csp, seed=0).sample(1, extra=full)


# -- numerics -----------------------------------------------------------------------------------
CASES = [  # (op, shape, shift, bias, clip, out dtype)
    ("gemm", (32, 48, 64), 10, True, (-128, 127), "int8"),
    ("gemm", (16, 32, 32), 9, False, None, "int8"),  # the cast alone wraps (no clip)
    ("gemm", (16, 32, 32), 0, True, None, "int32"),  # bias only, int32: four byte planes
    ("bmm", (2, 8, 32, 48), 10, True, (0, 127), "int8"),  # VTA's SHR, MIN 127, MAX 0
    ("c2d", (1, 8, 8, 16, 32, 3, 3, 1, 1, 1), 9, True, (-128, 127), "int8"),
    ("c2d", (1, 9, 7, 32, 16, 3, 3, 2, 1, 1), 9, True, (-100, 100), "int8"),
]


def _epi_compute(op, shape, shift, bias, clip, out_dtype):
    base = ops.OPERATORS[op][0](*shape, dtype=S8)
    return ops.requantize(base, shift, bias=bias, clip=clip, out_dtype=out_dtype)


def _run_sim(p: GemmParams, x, w, b) -> np.ndarray:
    inputs = pack_inputs(x, w)
    if p.bias:
        inputs["bias"] = pack_bias(b)
    return unpack_output(simulate(gemm_int32_program(p), inputs).outputs["C"], p.planes)


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c[0]}-{c[5]}-{'bias' if c[3] else 'nobias'}" for c in CASES]
)
def test_epilogue_bit_exact_on_simulator_and_cpu(case):
    """Simulated VTA programs (both thread counts and tile orders) and the scheduled TIR
    compiled for the CPU both equal numpy's requantised result exactly."""
    import tvm

    op, shape, shift, bias, clip, out_dtype = case
    space = generate_space(_epi_compute(*case), "vta")
    x, w, b, acc = _data(op, shape, bias)
    ref = _requant(acc, b, shift, clip, out_dtype)
    assert ref.dtype == np.dtype(out_dtype) and len(np.unique(ref)) > 20  # not all saturated
    picked: dict[tuple[int, int], dict] = {}
    for a in RandSAT(space.csp, seed=5).sample(30):
        picked.setdefault((a["vta.vthreads"], a["vta.order"]), a)
    assert len(picked) >= 2
    for a in picked.values():
        p = GemmParams.from_assignment(a)
        assert p.planes == (1 if out_dtype == "int8" else 4) and p.bias == int(bias)
        np.testing.assert_array_equal(_run_sim(p, x, w, b), ref)
    # the CPU oracle: the scheduled TIR, epilogue computed at each output tile
    a = next(iter(picked.values()))
    assert any(step.op == "reverse_compute_at" for step in space.template.steps)
    mod = space.apply(a).mod
    ex = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))
    arrays = [x, w, *([b] if bias else []), np.zeros(ref.shape, ref.dtype)]
    args = [tvm.runtime.tensor(v, tvm.cpu()) for v in space.prepare_args(arrays)]
    ex["main"](*args)
    np.testing.assert_array_equal(args[-1].numpy(), ref)


# -- the program and its cost -------------------------------------------------------------------
def _on(program, engine):
    return [i for i in program.instructions if engine_of(i) == engine]


def test_epilogue_program_stores_int8_once_and_counts_its_alu_work():
    """A 256³ GEMM, the same schedule with and without the epilogue: one int8 STORE per tile
    (a quarter of the byte-plane STORE bytes), the epilogue's ALU instructions and the bias
    loads on the compute engine, all in the cycle count."""
    geometry = dict(m_blocks=256, n_blocks=16, k_blocks=16, tile_m=64, tile_n=8, tile_k=8)
    plain = GemmParams(**geometry, vthreads=2, order=1)
    epi = dataclasses.replace(
        plain,
        out_int8=1,
        bias=1,
        bias_arg=2,
        epilogue=(
            (ALU_ADD, 0, SRC_BIAS),
            (ALU_SHR, 8, SRC_IMM),
            (ALU_MIN, 127, SRC_IMM),
            (ALU_MAX, -128, SRC_IMM),
        ),
    )
    t = TimingParams()
    progs = {k: gemm_int32_program(p) for k, p in (("plain", plain), ("epi", epi))}
    rep = {k: time_program(v, t) for k, v in progs.items()}
    tiles = (256 // 64) * (16 // 8)
    out = {k: r.bytes_by_counter["out_store_nbytes"] for k, r in rep.items()}
    assert out["plain"] == 4 * 256 * 256 and out["epi"] == 256 * 256 == out["plain"] // 4
    assert rep["epi"].dram_write_bytes * 4 == rep["plain"].dram_write_bytes
    # bias: one ACC load of tile_n blocks per thread and column tile (columns outer: reused)
    assert rep["epi"].bytes_by_counter["acc_load_nbytes"] == 256 * 4
    stores = {
        k: [
            i
            for i in v.instructions
            if isinstance(i, MemInsn) and i.opcode == Opcode.STORE and not i.is_nop
        ]
        for k, v in progs.items()
    }
    assert len(stores["plain"]) == 4 * len(stores["epi"]) == 4 * tiles
    alus = {k: [i for i in v.instructions if isinstance(i, AluInsn)] for k, v in progs.items()}
    assert len(alus["plain"]) == 3 * tiles and len(alus["epi"]) == 4 * tiles
    acc = 64 * 8
    assert rep["plain"].alu_uops == 3 * tiles * acc and rep["epi"].alu_uops == 4 * tiles * acc
    assert any(
        i.memory_type == MemId.ACC for i in progs["epi"].instructions if isinstance(i, MemInsn)
    )
    # the compute and store engines are busy exactly for their instructions' costs
    cfg = VTAConfig()
    for k, prog in progs.items():
        for name, engine in (("compute", Engine.COMPUTE), ("store", Engine.STORE)):
            busy = sum(cost(i, cfg, t).total for i in _on(prog, engine))
            assert rep[k].engines[name].busy_cycles == busy
    # what the epilogue version saves is at most the byte-plane stores and shifts it drops
    saved = sum(cost(i, cfg, t).total for i in stores["plain"] + alus["plain"])
    saved -= sum(cost(i, cfg, t).total for i in stores["epi"])
    assert rep["epi"].cycles >= rep["plain"].cycles - saved


def test_runner_checks_an_epilogue_program(tmp_path):
    """The runner packs the bias (``arg{bias_arg}``), unpacks the int8 result, and catches a
    wrong byte."""
    case = ("gemm", (32, 48, 64), 10, True, (-128, 127), "int8")
    x, w, b, acc = _data("gemm", (32, 48, 64), True, seed=2)
    ref = _requant(acc, b, 10, (-128, 127), "int8")
    space = generate_space(_epi_compute(*case), "vta")
    a = RandSAT(space.csp, seed=1).sample(1)[0]
    p = GemmParams.from_assignment(a)
    assert GemmParams.from_assignment(p.assignment()) == p
    path, kind, msg, info = build_vta(
        "", {}, str(tmp_path / "e.pkl"), {"assignment": p.assignment(), "vta_config": "{}"}
    )
    assert kind is None, msg
    args, exp, bad = tmp_path / "args.npz", tmp_path / "exp.npz", tmp_path / "bad.npz"
    np.savez(args, arg0=x, arg1=w, arg2=b, arg3=np.zeros_like(ref))
    np.savez(exp, arg3=ref)
    wrong = ref.copy()
    wrong[1, 2] ^= 1
    np.savez(bad, arg3=wrong)
    ok, no = VTARunner(check="always").run(
        [RunInput(path, str(args), str(exp)), RunInput(path, str(args), str(bad))]
    )
    assert ok.ok and no.error_kind == ErrorKind.WRONG_RESULT


# -- tuning -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("op", "shape"), [("gemm", (64, 64, 64)), ("c2d", (1, 6, 6, 16, 16, 3, 3, 1, 1, 1))]
)
def test_tune_with_epilogue(tmp_path, op, shape):
    """A few trials of ``heronlike.tune(..., target="vta")`` on a requantised compute: correct
    (the runner's own bit-exact check), and the best program equals numpy's result for an
    in-range bias, with one int8 byte stored per output element."""
    compute = _epi_compute(op, shape, 10, True, (-128, 127), "int8")
    result = heronlike.tune(
        compute, "vta", trials=4, batch_size=4, seed=0, records=str(tmp_path / "r.sqlite")
    )
    assert result.correct is True
    p = GemmParams.from_assignment(result.assignment)
    report = time_program(gemm_int32_program(p))
    assert result.latency_s == pytest.approx(report.cycles / 100e6)
    x, w, b, acc = _data(op, shape, True, seed=4)
    ref = _requant(acc, b, 10, (-128, 127), "int8")
    np.testing.assert_array_equal(_run_sim(p, x, w, b), ref)
    assert report.bytes_by_counter["out_store_nbytes"] == ref.size


def test_tune_inputs_keep_a_requantised_output_unsaturated():
    """The tune's correctness check draws an int32 bias from the int16 range, so the int8
    output of a requantised GEMM is not all ±127 (a full-range bias would make it so, and a
    kernel that dropped the GEMM would still pass)."""
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs

    dag = ComputeDAG.from_compute(ops.requantize(ops.gemm(16, 64, 64, "int8-int8"), 12, bias=True))
    arrays = random_inputs(dag, np.random.default_rng(0))
    bias = [a for p, a in zip(dag.params, arrays, strict=True) if a.dtype == np.int32]
    assert bias and all(np.abs(b).max() < 2**15 for b in bias)
    (out,) = reference_outputs(dag, arrays).values()
    saturated = np.isin(out, (-128, 127)).mean()
    assert saturated < 0.1, saturated  # a full-range int32 bias: ~1.0
