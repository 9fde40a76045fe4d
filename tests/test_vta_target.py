"""The VTA target: discovery, rules and CSP, lowering, the simulator runner, tuning end to end."""

from __future__ import annotations

import numpy as np
import pytest

import heronlike
from heronlike import ops
from heronlike.dla_targets.vta import VTAConfig, VTATarget, simulate, time_program
from heronlike.dla_targets.vta.lowering import (
    GemmParams,
    build_vta,
    gemm_int32_program,
    pack_inputs,
    unpack_int32_output,
)
from heronlike.dla_targets.vta.runner import VTARunner
from heronlike.errors import (
    UnknownTargetError,
    UnsupportedComputeError,
    UnsupportedDtypeError,
    UnsupportedShapeError,
)
from heronlike.measure import RunInput
from heronlike.measure.kinds import ErrorKind
from heronlike.sampler import RandSAT
from heronlike.space import generate_space
from heronlike.target import available_targets, get_target

S8 = ops.target_dtype("int8", "vta")


def _gemm(m: int, n: int, k: int):
    return ops.gemm(m, n, k, S8)


def _operands(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    return x, w, x.astype(np.int32) @ w.astype(np.int32).T


def test_target_parses(tmp_path):
    assert available_targets()["vta"] is VTATarget
    tgt = get_target("vta")
    assert isinstance(tgt, VTATarget) and tgt.key == "vta"
    assert not tgt.runs_in_process
    assert S8 == "int8-int8"
    (intrin,) = tgt.intrinsics
    assert (intrin.m, intrin.n, intrin.k) == (1, 16, 16)
    assert (intrin.a_dtype, intrin.b_dtype, intrin.c_dtype) == ("int8", "int8", "int32")
    sizes = {lv.name: lv.capacity_bytes for lv in tgt.memory}
    assert sizes == {"input": 32768, "weight": 262144, "accumulator": 131072, "uop": 32768}
    assert tgt.peak_ops_per_s() == pytest.approx(51.2e9)
    tgt.check_host()
    path = tmp_path / "vta_config.json"
    VTAConfig(LOG_INP_BUFF_SIZE=14).to_json(path)
    small = get_target(f"vta -config={path}")
    assert small.memory_level("input").capacity_bytes == 16384
    with pytest.raises(UnknownTargetError):
        get_target("vta -nosuch=1")
    with pytest.raises(UnknownTargetError):
        get_target(f"vta -config={tmp_path / 'missing.json'}")


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(UnsupportedDtypeError):
        generate_space(ops.gemm(64, 64, 64, "float32"), "vta")
    with pytest.raises(UnsupportedDtypeError):  # uint8 x int8 is VNNI's int8, not VTA's
        generate_space(ops.gemm(64, 64, 64, "int8"), "vta")
    with pytest.raises(UnsupportedShapeError):
        generate_space(_gemm(64, 40, 64), "vta")
    with pytest.raises(UnsupportedShapeError):
        generate_space(_gemm(64, 64, 24), "vta")
    with pytest.raises(UnsupportedShapeError):  # convolutions run one image per program
        generate_space(ops.c2d(2, 8, 8, 16, 16, 3, 3, 1, 1, dtype=S8), "vta")
    with pytest.raises(UnsupportedShapeError):  # padding wider than the kernel window
        generate_space(ops.c2d(1, 8, 8, 16, 16, 1, 1, 1, 1, dtype=S8), "vta")
    with pytest.raises(UnsupportedShapeError):  # channels not multiples of 16
        generate_space(ops.c2d(1, 8, 8, 16, 24, 3, 3, 1, 1, dtype=S8), "vta")
    with pytest.raises(UnsupportedComputeError):  # 1-D convolutions are not VTA programs yet
        generate_space(ops.c1d(1, 16, 16, 16, 3, dtype=S8), "vta")


SMALL_COMPUTES = [
    ("gemm", (2, 16, 32)),  # 2 output blocks: valid only with one k iteration per GEMM
    ("gemm", (16, 16, 16)),
    ("gemm", (32, 32, 32)),
    ("gemm", (1, 32, 64)),
    ("bmm", (3, 8, 32, 48)),
    ("c2d", (1, 8, 8, 16, 32, 3, 3, 1, 1, 1)),
    ("c2d", (1, 9, 7, 32, 16, 3, 3, 2, 1, 1)),
    ("c2d", (1, 8, 8, 32, 32, 1, 1, 2, 0, 1)),
    ("c2d", (1, 10, 10, 16, 16, 3, 3, 1, 2, 2)),
    ("c2d", (1, 2, 2, 16, 16, 1, 1, 1, 0, 1)),  # 4 pixels, 1 block: hazard-bound
]


@pytest.mark.parametrize(("op", "shape"), SMALL_COMPUTES)
def test_every_sampled_program_passes_the_simulator(op, shape):
    """The hazard rule is exact: small computes have schedules, and no sampled program fails
    any simulator check (hazard, bounds, fields, tokens)."""
    from heronlike.dla_targets.vta.hazards import ACC_WAW_MIN_DISTANCE

    space = generate_space(ops.OPERATORS[op][0](*shape, dtype=S8), "vta")
    samples = RandSAT(space.csp, seed=2).sample(40)
    assert samples
    short = 0
    for a in samples:
        assert space.csp.violations(a) == []
        p = GemmParams.from_assignment(a)
        time_program(gemm_int32_program(p))  # raises on any simulator check
        short += p.tile_m * p.tile_n < ACC_WAW_MIN_DISTANCE
    if shape == (2, 16, 32):  # only tiles below the hazard distance exist: they are allowed
        assert short == len(samples)
        assert all(GemmParams.from_assignment(a).tile_k == 1 for a in samples)


def test_hazard_constraint_is_exact():
    """Every point the hazard constraint rejects does fail the simulator's hazard check, and
    every point it keeps passes (a 2 × 16 × 64 GEMM, all tilings enumerated)."""
    from heronlike.errors import VTAHazardError

    space = generate_space(_gemm(2, 16, 64), "vta")
    ok = {
        (a["vta.tile_m"], a["vta.tile_k"], a["vta.fold"])
        for a in RandSAT(space.csp, seed=0).sample(200)
    }
    for tm in (1, 2):
        for tk in (1, 2, 4):
            for fold in (0, 1):
                p = GemmParams(2, 1, 4, tile_m=tm, tile_n=1, tile_k=tk, fold=fold)
                try:
                    time_program(gemm_int32_program(p))
                    hazard = False
                except VTAHazardError:
                    hazard = True
                assert hazard == (tk > 1), p  # fewer than 3 accumulators: only one k iteration
                if not hazard:
                    assert (tm, tk, fold) in ok


def _exact(op: str, shape: tuple[int, ...], a: dict, seed: int = 0) -> None:
    from heronlike.reference import random_inputs, reference_outputs

    space = generate_space(ops.OPERATORS[op][0](*shape, dtype=S8), "vta")
    arrays = random_inputs(space.dag, np.random.default_rng(seed))
    (ref,) = reference_outputs(space.dag, arrays).values()
    program = gemm_int32_program(GemmParams.from_assignment(a))
    got = unpack_int32_output(simulate(program, pack_inputs(arrays[0], arrays[1])).outputs["C"])
    np.testing.assert_array_equal(got, ref)
    # the weight layout the rules pre-pack (C2D) is accepted as well
    packed = space.prepare_args(arrays)
    got2 = unpack_int32_output(simulate(program, pack_inputs(packed[0], packed[1])).outputs["C"])
    np.testing.assert_array_equal(got2, ref)


@pytest.mark.parametrize(("op", "shape"), SMALL_COMPUTES[4:])
def test_bmm_and_conv_bit_exact(op, shape):
    """BMM and C2D (padded, strided, dilated) programs equal numpy's exact int32 result, for
    both virtual-thread settings and both tile orders."""
    space = generate_space(ops.OPERATORS[op][0](*shape, dtype=S8), "vta")
    picked: dict[tuple[int, int], dict] = {}
    for a in RandSAT(space.csp, seed=5).sample(40):
        picked.setdefault((a["vta.vthreads"], a["vta.order"]), a)
    assert len({k[1] for k in picked}) == 2
    for a in picked.values():
        _exact(op, shape, a)


def test_conv_tir_oracle_equals_simulator():
    """The scheduled TIR of a C2D candidate (pre-packed weights) and its VTA program agree."""
    import tvm

    from heronlike.reference import random_inputs, reference_outputs

    space = generate_space(ops.c2d(1, 6, 6, 16, 32, 3, 3, 2, 1, dtype=S8), "vta")
    arrays = random_inputs(space.dag, np.random.default_rng(1))
    (ref,) = reference_outputs(space.dag, arrays).values()
    a = RandSAT(space.csp, seed=4).sample(1)[0]
    ex = tvm.compile(space.apply(a).mod, target=tvm.target.Target({"kind": "llvm"}))
    args = [tvm.runtime.tensor(v, tvm.cpu()) for v in space.prepare_args(arrays)]
    ex["main"](*args)
    np.testing.assert_array_equal(args[-1].numpy(), ref)
    _exact("c2d", (1, 6, 6, 16, 32, 3, 3, 2, 1, 1), a)


@pytest.mark.parametrize("shape", [(64, 64, 64), (128, 256, 512)])
def test_sampled_assignments_pass_the_simulator(shape):
    space = generate_space(_gemm(*shape), "vta")
    samples = RandSAT(space.csp, seed=1).sample(50)
    assert len(samples) == 50
    cfg = VTAConfig()
    seen = set()
    for a in samples:
        assert space.csp.violations(a) == []
        p = GemmParams.from_assignment(a)
        vt = p.vthreads
        assert vt * p.tile_m * p.tile_k * cfg.elem_bytes("INP") <= cfg.buffer_bytes("INP")
        assert vt * p.tile_n * p.tile_k * cfg.elem_bytes("WGT") <= cfg.buffer_bytes("WGT")
        assert vt * p.tile_m * p.tile_n * cfg.elem_bytes("ACC") <= cfg.buffer_bytes("ACC")
        report = time_program(gemm_int32_program(p))  # raises on any simulator check
        assert report.lower_bound_cycles <= report.cycles <= report.serial_cycles
        seen.add((vt, p.order, p.fold))
    assert {s[0] for s in seen} == {1, 2}  # both virtual-thread settings are sampled


def test_tir_oracle_equals_simulator():
    """The scheduled TIR of a candidate, compiled for the CPU, and the VTA program generated
    for it compute the same int32 result (and both equal numpy)."""
    import tvm

    m, n, k = 64, 64, 64
    space = generate_space(_gemm(m, n, k), "vta")
    x, w, ref = _operands(m, n, k)
    samples = RandSAT(space.csp, seed=3).sample(40)
    picked, kinds = [], set()
    for a in samples:  # one of each (vthreads, order, fold) seen, at most 4
        kind = (a["vta.vthreads"], a["vta.order"], a["vta.fold"])
        if kind not in kinds and len(picked) < 4:
            kinds.add(kind)
            picked.append(a)
    assert any(a["vta.vthreads"] == 2 for a in picked)
    for a in picked:
        ex = tvm.compile(space.apply(a).mod, target=tvm.target.Target({"kind": "llvm"}))
        dev = tvm.cpu()
        args = [tvm.runtime.tensor(v, dev) for v in (x, w, np.zeros((m, n), np.int32))]
        ex["main"](*args)
        tir_out = args[2].numpy()
        program = gemm_int32_program(GemmParams.from_assignment(a))
        sim_out = unpack_int32_output(simulate(program, pack_inputs(x, w)).outputs["C"])
        np.testing.assert_array_equal(tir_out, sim_out)
        np.testing.assert_array_equal(sim_out, ref)


def _artifact(tmp_path, params: GemmParams, name: str = "cand.pkl") -> str:
    assignment = {f"vta.{f}": getattr(params, f) for f in GemmParams.__dataclass_fields__}
    path, kind, msg, info = build_vta(
        "", {}, str(tmp_path / name), {"assignment": assignment, "vta_config": "{}"}
    )
    assert kind is None, msg
    assert info["instructions"] > 0
    return str(path)


def test_runner_checks_and_reports_simulated_time(tmp_path):
    m, n, k = 32, 64, 64
    x, w, ref = _operands(m, n, k, seed=5)
    args, exp, bad = tmp_path / "args.npz", tmp_path / "exp.npz", tmp_path / "bad.npz"
    np.savez(args, arg0=x, arg1=w, arg2=np.full((m, n), 7, np.int32))  # output is ignored
    np.savez(exp, arg2=ref)
    wrong = ref.copy()
    wrong[3, 5] += 1
    np.savez(bad, arg2=wrong)
    params = GemmParams(m, n // 16, k // 16, tile_m=8, tile_n=2, tile_k=2, vthreads=2, order=1)
    art = _artifact(tmp_path, params)
    runner = VTARunner()
    seen = []
    ok, wrong_res, garbage = runner.run(
        [
            RunInput(art, str(args), str(exp)),
            RunInput(art, str(args), str(bad)),
            RunInput(str(args), str(args), str(exp)),  # not a program
        ],
        on_result=lambda i, r: seen.append(i),
    )
    assert seen == [0, 1, 2]
    cycles = time_program(gemm_int32_program(params)).cycles
    assert ok.ok and ok.latency_s == pytest.approx(cycles / 100e6)
    assert runner.reports[art].cycles == cycles
    assert wrong_res.error_kind == ErrorKind.WRONG_RESULT
    assert garbage.error_kind == ErrorKind.RUN
    # a bad assignment is a build failure, not an exception
    _, kind, msg, _ = build_vta("", {}, str(tmp_path / "x.pkl"), {"assignment": {}})
    assert kind == ErrorKind.BUILD and "vta." in msg
    runner.close()


def test_tune_end_to_end(tmp_path):
    result = heronlike.tune(
        _gemm(64, 64, 64),
        "vta",
        trials=8,
        batch_size=8,
        seed=0,
        records=str(tmp_path / "records.sqlite"),
    )
    assert result.correct is True
    assert result.latency_s is not None
    program = gemm_int32_program(GemmParams.from_assignment(result.assignment))
    report = time_program(program)
    assert result.latency_s == pytest.approx(report.cycles / 100e6)
    assert result.throughput == pytest.approx(2 * 64**3 / result.latency_s)


@pytest.mark.parametrize(
    ("op", "shape"), [("bmm", (2, 16, 32, 32)), ("c2d", (1, 6, 6, 16, 16, 3, 3, 1, 1, 1))]
)
def test_tune_bmm_and_conv_end_to_end(tmp_path, op, shape):
    result = heronlike.tune(
        ops.OPERATORS[op][0](*shape, dtype=S8),
        "vta",
        trials=4,
        batch_size=4,
        seed=0,
        records=str(tmp_path / "records.sqlite"),
    )
    assert result.correct is True
    report = time_program(gemm_int32_program(GemmParams.from_assignment(result.assignment)))
    assert result.latency_s == pytest.approx(report.cycles / 100e6)


def test_autotvm_baseline_space():
    """The AutoTVM-style space: its size, exhaustive optimum ≤ any random search's, invalid
    points reported, and the pruning bound below every simulated point."""
    from heronlike.dla_targets.vta import TimingParams
    from heronlike.dla_targets.vta.baseline import (
        INVALID,
        autotvm_space,
        compute_params,
        cycle_lower_bound,
        evaluate,
        exhaustive,
        random_search,
        space_size,
    )

    for compute in (_gemm(64, 64, 128), ops.c2d(1, 4, 4, 32, 32, 3, 3, 1, 1, dtype=S8)):
        g = compute_params(compute)
        points = list(autotvm_space(g))
        assert len(points) == space_size(g)
        ex = exhaustive(g)
        assert ex.best is not None and ex.trials == len(points)
        rnd = random_search(g, 8, seed=1)
        assert rnd.trials == 8 and rnd.cycles >= ex.cycles
        cfg, t = VTAConfig(), TimingParams()
        costs = [evaluate(p) for p in points]
        assert min(c.cycles for c in costs) == ex.cycles
        for c in costs:
            if c.cycles != INVALID:
                assert cycle_lower_bound(c.params, cfg, t) <= c.cycles
    assert any(c.cycles == INVALID for c in costs)  # e.g. a 4 × 4-pixel tile × 32 channels
