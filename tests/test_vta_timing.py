"""Timing-only VTA simulation (dla_targets/vta/fast_timing.py): the same cycles, reports and
errors as the full simulator, much faster; the simulation budget; the runner's check policy and
the report it records."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from heronlike import ops
from heronlike.dla_targets.vta import (
    MemId,
    MemInsn,
    Opcode,
    ProgramBuilder,
    TimingParams,
    Uop,
    simulate,
    time_program,
)
from heronlike.dla_targets.vta.examples import gemm_program, pack_gemm_operands
from heronlike.dla_targets.vta.fast_timing import program_columns, time_program_fast
from heronlike.dla_targets.vta.isa import AluInsn, FinishInsn
from heronlike.dla_targets.vta.lowering import (
    GemmParams,
    build_vta,
    gemm_int32_program,
    pack_bias,
    pack_inputs,
)
from heronlike.dla_targets.vta.report import report_dict
from heronlike.dla_targets.vta.runner import VTARunner
from heronlike.dla_targets.vta.simulator import VTATimeoutError, _reference_timing
from heronlike.dla_targets.vta.timing import cost
from heronlike.errors import VTAProgramError
from heronlike.measure import RunInput
from heronlike.measure.kinds import ErrorKind
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

S8 = ops.target_dtype("int8", "vta")
#: the default, the Chisel profile, and one that fills command queues and ends bursts early
PROFILES = (
    TimingParams(),
    TimingParams.chisel(),
    TimingParams(cmd_queue_depth=24, fetch_burst=64, read_row_overhead=32, dma_latency=40),
)
EXAMPLES = [
    ((64, 64, 64), {"tile_m": 64, "tile_n": 4, "tile_k": 4}),
    ((64, 64, 64), {"tile_m": 16, "tile_n": 2, "tile_k": 2, "vthreads": 2}),
    ((128, 128, 128), {"tile_m": 32, "tile_n": 4, "tile_k": 4, "vthreads": 2}),
    ((128, 64, 256), {"tile_m": 128, "tile_n": 2, "tile_k": 8, "fold_m": True}),
    ((64, 64, 64), {"tile_m": 16, "tile_n": 4, "tile_k": 1, "bias": True}),
]


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(-128, 128, (m, k), dtype=np.int8),
        rng.integers(-128, 128, (n, k), dtype=np.int8),
    )


def _lowered(shape, n, seed, max_insns=5000):
    space = generate_space(ops.gemm(*shape, S8), "vta")
    out = []
    for a in RandSAT(space.csp, seed=seed).sample(n):
        program = gemm_int32_program(GemmParams.from_assignment(a))
        if len(program.instructions) <= max_insns:
            out.append(program)
    return out


@pytest.mark.parametrize("shape_tiles", EXAMPLES)
def test_timing_only_equals_full_simulation_on_examples(shape_tiles):
    (m, n, k), tiles = shape_tiles
    program = gemm_program(m, n, k, **tiles)
    a, w = _operands(m, n, k)
    inputs = pack_gemm_operands(a, w)
    if tiles.get("bias"):
        inputs["bias"] = np.arange(n, dtype=np.int32).reshape(program.buffers["bias"].shape)
    for t in PROFILES:
        full = simulate(program, inputs, timing=t)
        fast = simulate(program, timing=t, timing_only=True)
        assert fast.report == full.report and fast.outputs == {} and fast.dram is None


def test_timing_only_equals_full_simulation_on_lowered_programs():
    """Programs of sampled schedules (test_vta_target's sampling), each checked against the
    full simulation (numerics on) for small shapes and the reference event loop for bigger."""
    small = _lowered((64, 64, 64), 12, seed=4)
    assert len(small) >= 8
    x, w = _operands(64, 64, 64, seed=1)
    for program in small:
        inputs = pack_inputs(x, w)
        for t in PROFILES[:2]:
            assert time_program(program, t) == simulate(program, inputs, timing=t).report
    big = _lowered((128, 256, 512), 10, seed=5) + _lowered((256, 256, 256), 10, seed=6)
    assert len(big) >= 12
    for program in big:
        for t in PROFILES:
            fast = time_program_fast(program, t)
            assert fast == _reference_timing(program, t)
            assert fast.lower_bound_cycles <= fast.cycles <= fast.serial_cycles
            assert fast.bus_busy_cycles <= fast.cycles


def test_explicit_schedule_grid_equals_reference():
    """Every lowering code path (virtual threads, tile order, folding, K in one tile)."""
    seen = set()
    for vt in (1, 2):
        for order in (0, 1):
            for fold in (0, 1):
                for tk in (1, 4):
                    p = GemmParams(16, 8, 4, tile_m=4, tile_n=2, tile_k=tk, vthreads=vt)
                    p = GemmParams(**{**p.__dict__, "order": order, "fold": fold})
                    program = gemm_int32_program(p)
                    for t in PROFILES:
                        assert time_program(program, t) == _reference_timing(program, t)
                    seen.add((vt, order, fold, tk))
    assert len(seen) == 16


def test_vectorised_costs_equal_timing_cost():
    programs = [gemm_program(*s, **t) for s, t in EXAMPLES] + _lowered((64, 64, 64), 6, seed=2)
    for program in programs:
        for t in PROFILES:
            cols = program_columns(program, t)
            want = [cost(i, program.config, t) for i in program.instructions]
            assert cols.pre.tolist() == [c.pre for c in want]
            assert cols.beats.tolist() == [c.beats for c in want]
            assert cols.dma_bytes.tolist() == [c.dma_bytes for c in want]


def _lowered_epilogue(n, seed):
    """Programs of sampled schedules of requantised computes (ALU epilogue, bias ACC loads,
    one int8 store per tile; int32 byte planes after a bias add)."""
    computes = (
        ops.requantize(ops.gemm(64, 64, 64, S8), 8, bias=True),
        ops.requantize(ops.bmm(2, 16, 32, 32, S8), 6, bias=True, clip=(0, 127)),
        ops.requantize(
            ops.c2d(1, 8, 8, 16, 32, 3, 3, 1, 1, dtype=S8),
            0,
            bias=True,
            clip=None,
            out_dtype="int32",
        ),
    )
    out = []
    for compute in computes:
        space = generate_space(compute, "vta")
        out += [GemmParams.from_assignment(a) for a in RandSAT(space.csp, seed=seed).sample(n)]
    return out


def test_timing_only_equals_reference_on_epilogue_programs():
    """The epilogue's ALU instructions and bias loads (compute engine) cost the same in the
    vectorised columns as in :func:`timing.cost`, and the timing-only simulator gives the
    reference's report, also against the full simulation with numerics."""
    params = _lowered_epilogue(4, seed=7)
    assert {p.planes for p in params} == {1, 4} and all(p.bias for p in params)
    for p in params:
        program = gemm_int32_program(p)
        assert any(isinstance(i, AluInsn) and not i.use_imm for i in program.instructions)
        for t in PROFILES:
            fast = time_program_fast(program, t)
            assert fast == _reference_timing(program, t)
            assert fast.lower_bound_cycles <= fast.cycles <= fast.serial_cycles
            cols = program_columns(program, t)
            want = [cost(i, program.config, t) for i in program.instructions]
            assert cols.pre.tolist() == [c.pre for c in want]
            assert cols.beats.tolist() == [c.beats for c in want]
        if p.kind == 0:  # numerics on (GEMM operands, a bias)
            x, w = _operands(64, 64, 64, seed=3)
            inputs = {**pack_inputs(x, w), "bias": pack_bias(np.arange(64, dtype=np.int32))}
            assert time_program(program) == simulate(program, inputs).report


def _errors(program, t):
    got = []
    for run in (lambda: time_program_fast(program, t), lambda: simulate(program, timing=t)):
        with pytest.raises(VTAProgramError) as info:
            run()
        got.append((type(info.value), str(info.value)))
    assert got[0] == got[1]
    return got[0]


def _hand(insns, **timing):
    b = ProgramBuilder()
    for insn in insns:
        b.emit(insn)
    b.emit(FinishInsn())
    return b.build(), TimingParams(**timing)


def test_same_errors_as_the_full_simulator():
    # accumulator hazard in the expanded stream
    kind, msg = _errors(gemm_program(16, 32, 32, tile_m=1, tile_n=2, tile_k=2), TimingParams())
    assert kind.__name__ == "VTAHazardError" and "2 apart" in msg
    # an expanded index out of its buffer
    b = ProgramBuilder()
    b.gemm(b.kernel([Uop(0, 0, 0), Uop(1, 0, 0), Uop(2, 0, 0)]), iter_in=2048, dst=(0, 3))
    kind, msg = _errors(b.finish(), TimingParams())
    assert "outside ACC" in msg
    # deadlock, a full command queue, tokens left over, a token queue over its depth
    pop = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.UOP, pop_prev=True)
    push = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, push_next=True)
    nop_c = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.UOP)
    for insns, timing, name in (
        ([pop], {}, "VTADeadlockError"),
        ([pop, *[nop_c] * 9, push], {"cmd_queue_depth": 8}, "VTADeadlockError"),
        ([push], {}, "VTATokenError"),
        ([push] * 3, {"token_queue_depth": 2}, "VTATokenError"),
    ):
        kind, _ = _errors(*_hand(insns, **timing))
        assert kind.__name__ == name


def test_budget_stops_long_simulations():
    program = gemm_program(64, 64, 64, tile_m=16, tile_n=2, tile_k=2, vthreads=2)
    for limit in (10, 100):
        for run in (
            lambda lim=limit: time_program(program, max_events=lim),
            lambda lim=limit: simulate(program, max_events=lim),
            lambda: simulate(program, timeout_s=0.0),
            lambda: time_program(program, timeout_s=0.0),
        ):
            with pytest.raises(VTATimeoutError, match="budget"):
                run()
    assert issubclass(VTATimeoutError, TimeoutError)
    # a budget that suffices changes nothing
    n_events = 4 * len(program.instructions) + 100
    assert time_program(program, max_events=n_events) == time_program(program)


def test_timing_only_is_much_faster_on_a_256_cubed_gemm():
    """Speed targets live in benchmarks; this only guards the ratio, measured here."""
    p = GemmParams(16 * 16, 16, 16, tile_m=32, tile_n=4, tile_k=4, vthreads=2, order=0, fold=0)
    program = gemm_int32_program(p)
    x, w = _operands(256, 256, 256)
    inputs = pack_inputs(x, w)
    t0 = time.perf_counter()
    full = simulate(program, inputs)
    full_s = time.perf_counter() - t0
    fast_s = []
    for _ in range(3):
        t0 = time.perf_counter()
        report = time_program(program)
        fast_s.append(time.perf_counter() - t0)
    assert report == full.report
    assert full_s >= 5 * min(fast_s), (full_s, fast_s)


# -- the runner ---------------------------------------------------------------------------------
def _artifact(tmp_path, params, name):
    assignment = {f"vta.{f}": getattr(params, f) for f in GemmParams.__dataclass_fields__}
    path, kind, msg, _ = build_vta(
        "", {}, str(tmp_path / name), {"assignment": assignment, "vta_config": "{}"}
    )
    assert kind is None, msg
    return str(path)


def test_runner_checks_numerics_where_results_depend_on_them(tmp_path):
    m, n, k = 32, 64, 64
    x, w = _operands(m, n, k, seed=5)
    ref = x.astype(np.int32) @ w.astype(np.int32).T
    args, exp, bad = tmp_path / "args.npz", tmp_path / "exp.npz", tmp_path / "bad.npz"
    np.savez(args, arg0=x, arg1=w, arg2=np.zeros((m, n), np.int32))
    np.savez(exp, arg2=ref)
    np.savez(bad, arg2=ref + 1)  # every output wrong: only a numerics run can tell
    fast = GemmParams(m, 4, 4, tile_m=32, tile_n=4, tile_k=4)  # one tile: fewest cycles
    slow = GemmParams(m, 4, 4, tile_m=8, tile_n=1, tile_k=4)  # same structure, more cycles
    a_fast, a_slow = _artifact(tmp_path, fast, "f.pkl"), _artifact(tmp_path, slow, "s.pkl")
    cycles = [time_program(gemm_int32_program(p)).cycles for p in (fast, slow)]
    assert cycles[0] < cycles[1]
    runner = VTARunner()  # check="best"
    first, worse, again = runner.run(
        [
            RunInput(a_fast, str(args), str(exp)),
            RunInput(a_slow, str(args), str(bad)),
            RunInput(a_fast, str(args), str(bad)),
        ]
    )
    # the first of a structure is checked; a worse one of the same structure is only timed
    # (a timed, unverified candidate); the best, and so its re-measurement at the end of a
    # tune, always is
    assert first.ok and runner.infos[a_fast]["numerics_checked"]
    assert worse.ok and not runner.infos[a_slow]["numerics_checked"]
    assert again.error_kind == ErrorKind.WRONG_RESULT
    # a wrong first candidate leaves its structure unverified: the next one is checked too
    fresh = VTARunner()
    wrong, next_ = fresh.run(
        [RunInput(a_fast, str(args), str(bad)), RunInput(a_slow, str(args), str(exp))]
    )
    assert wrong.error_kind == ErrorKind.WRONG_RESULT
    assert next_.ok and fresh.infos[a_slow]["numerics_checked"]
    assert VTARunner(check="never").run([RunInput(a_fast, str(args), str(bad))])[0].ok
    every = VTARunner(check=True)
    results = every.run([RunInput(a, str(args), str(exp)) for a in (a_slow, a_fast, a_slow)])
    assert all(r.ok for r in results) and every.infos[a_slow]["numerics_checked"]
    with pytest.raises(ValueError):
        VTARunner(check="sometimes")


def test_runner_records_the_simulation_report_and_times_out(tmp_path):
    x, w = _operands(32, 64, 64, seed=1)
    args = tmp_path / "args.npz"
    np.savez(args, arg0=x, arg1=w, arg2=np.zeros((32, 64), np.int32))
    art = _artifact(tmp_path, GemmParams(32, 4, 4, tile_m=8, tile_n=2, tile_k=2, vthreads=2), "a")
    runner = VTARunner()
    (res,) = runner.run([RunInput(art, str(args), None)])
    info = runner.infos[art]
    assert json.loads(json.dumps(info)) == info
    assert info["cycles"] == runner.reports[art].cycles
    assert res.latency_s == pytest.approx(info["cycles"] / 100e6)
    assert set(info["engines"]) == {"fetch", "load", "compute", "store"}
    assert {"busy_cycles", "token_stall_cycles", "bus_stall_cycles"} <= set(
        info["engines"]["compute"]
    )
    assert 0 < info["fraction_of_peak"] < 1 and info["dram_read_bytes"] > 0
    assert report_dict(runner.reports[art])["gops"] == info["gops"]
    (slow,) = VTARunner(max_events=50).run([RunInput(art, str(args), None)])
    assert slow.error_kind == ErrorKind.RUN_TIMEOUT and "budget" in slow.error_msg
    (slow,) = VTARunner(timeout_s=1e-9).run([RunInput(art, str(args), None)])
    assert slow.error_kind == ErrorKind.RUN_TIMEOUT


def test_tune_records_the_simulation_report_and_checks_the_final_run(tmp_path) -> None:
    """Each trial's record holds the simulator's report (cycles, engines, DMA bytes, whether
    its numerics were checked); the end-of-tune re-run is marked final and checked."""
    import heronlike
    from heronlike.records import Records

    path = tmp_path / "r.sqlite"
    result = heronlike.tune(
        ops.gemm(64, 64, 64, "int8-int8"), "vta", trials=6, batch_size=6, seed=1, records=path
    )
    assert result.correct is True
    with Records(path) as db:
        trials = db.trials(result.workload_key, result.target_key)
    ok = [t for t in trials if t.ok]
    assert ok and all(t.info["cycles"] > 0 for t in ok)
    for t in ok:  # latency is the simulated cycles at the configured clock
        assert t.latency_s == pytest.approx(t.info["cycles"] / 100e6)
    assert any(t.info["numerics_checked"] for t in ok)
