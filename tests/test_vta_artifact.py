"""Large VTA programs as columns (dla_targets/vta/table.py, lowering.py, fast_timing.py): the
columnar artifact round-trips exactly, the template generator builds the group-by-group
generator's program, vectorised encoding and validation agree with the per-instruction ones,
and the event loop's steady-state fast-forward gives the report of simulating every event."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heronlike import ops
from heronlike.dla_targets.vta import (
    AluInsn,
    AluOp,
    FinishInsn,
    MemId,
    MemInsn,
    Opcode,
    Program,
    ProgramBuilder,
    TimingParams,
    VTAConfig,
    encode,
    time_program,
)
from heronlike.dla_targets.vta import lowering as lowering_mod
from heronlike.dla_targets.vta.fast_timing import (
    _event_loop,
    program_columns,
    time_program_fast,
)
from heronlike.dla_targets.vta.lowering import (
    ARTIFACT_FORMAT,
    GemmParams,
    build_vta,
    gemm_int32_program,
    load_artifact,
)
from heronlike.dla_targets.vta.program import _check_one
from heronlike.dla_targets.vta.simulator import VTATimeoutError, _reference_timing
from heronlike.dla_targets.vta.table import InsnTable, decode_table, encode_table
from heronlike.errors import HeronlikeError, VTAProgramError
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

S8 = ops.target_dtype("int8", "vta")
CFG = VTAConfig()

sys.path.insert(0, str(Path(__file__).parent))  # the shared strategies module
from vta_strategies import FLAGS, INSTRUCTIONS  # noqa: E402


def _sampled(compute, n: int, seed: int) -> list[GemmParams]:
    space = generate_space(compute, "vta")
    return [GemmParams.from_assignment(a) for a in RandSAT(space.csp, seed=seed).sample(n)]


def _build(tmp_path, params: GemmParams, name: str) -> str:
    path, kind, msg, info = build_vta(
        "", {}, str(tmp_path / name), {"assignment": params.assignment(), "vta_config": "{}"}
    )
    assert kind is None, msg
    assert info["instructions"] > 0
    return str(path)


def _same_program(a: Program, b: Program) -> None:
    assert a.table.equals(b.table)
    assert a.instructions == b.instructions
    assert np.array_equal(a.uops, b.uops)
    assert a.dram_bytes == b.dram_bytes
    assert dict(a.buffers) == dict(b.buffers)


@pytest.mark.parametrize(
    "compute",
    [
        ops.gemm(128, 128, 256, S8),
        ops.c2d(1, 14, 14, 32, 32, 3, 3, 1, 1, dtype=S8),
        ops.requantize(ops.c2d(1, 8, 8, 16, 32, 3, 3, 2, 1, dtype=S8), 8, bias=True),
    ],
    ids=["gemm", "c2d", "c2d-epilogue"],
)
def test_artifact_round_trips_exactly(tmp_path, compute):
    """The artifact holds the program: same instructions, micro-ops, buffers and cycles."""
    for i, params in enumerate(_sampled(compute, 3, seed=8)):
        path = _build(tmp_path, params, f"c{i}.npz")
        loaded, got_params = load_artifact(path)
        assert got_params == params
        program = gemm_int32_program(params)
        _same_program(loaded, program)
        assert loaded.validated
        assert loaded.encoded() == [encode(insn, CFG) for insn in program.instructions]
        for t in (TimingParams(), TimingParams.chisel()):
            assert time_program(loaded, t) == time_program(program, t)


def test_old_pickled_artifacts_still_load(tmp_path, monkeypatch):
    """A format-1 artifact (a pickle of the program as instruction objects) reads as before."""
    params = _sampled(ops.gemm(64, 64, 64, S8), 1, seed=1)[0]
    program = gemm_int32_program(params)
    old_state = {
        "config": program.config,
        "instructions": program.instructions,
        "buffers": dict(program.buffers),
        "uops": program.uops,
        "dram_bytes": program.dram_bytes,
        "_validated": True,
    }
    # pickled as the frozen dataclass Program of format 1 was: the class, then its __dict__
    monkeypatch.setattr(Program, "__getstate__", lambda self: old_state)
    path = tmp_path / "old.pkl"
    data = {"format": "heronlike-vta-program/1", "config": CFG, "params": params}
    path.write_bytes(pickle.dumps({**data, "program": program}))
    monkeypatch.undo()
    loaded, got = load_artifact(str(path))
    assert got == params
    _same_program(loaded, program)
    assert time_program(loaded) == time_program(program)


def test_foreign_files_are_typed_errors(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not an artifact")
    with pytest.raises(VTAProgramError, match="not a VTA program artifact"):
        load_artifact(str(junk))
    other = tmp_path / "other.npz"
    with open(other, "wb") as f:
        np.savez(f, format=np.array("heronlike-vta-program/99"), meta=np.array("{}"))
    with pytest.raises(VTAProgramError, match="format.*99"):
        load_artifact(str(other))
    pickled = tmp_path / "p.pkl"
    pickled.write_bytes(pickle.dumps({"format": "something else"}))
    with pytest.raises(VTAProgramError, match=ARTIFACT_FORMAT):
        load_artifact(str(pickled))
    # a word that does not decode (an unknown opcode)
    params = GemmParams(4, 1, 1, tile_m=4, tile_n=1, tile_k=1)
    path = _build(tmp_path, params, "ok.npz")
    with np.load(path) as d:
        arrays = {k: d[k] for k in d.files}
    arrays["insns"][0, 0] |= np.uint64(7)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(VTAProgramError, match="instruction word 0"):
        load_artifact(path)


# -- the template generator builds the group-by-group generator's program ---------------------
@pytest.mark.parametrize(
    "compute",
    [
        ops.gemm(256, 256, 256, S8),
        ops.bmm(3, 64, 64, 32, S8),
        ops.c2d(1, 14, 14, 32, 32, 3, 3, 1, 1, dtype=S8),
        ops.c2d(1, 28, 28, 32, 64, 1, 1, 2, 0, dtype=S8),
        ops.requantize(ops.bmm(2, 16, 32, 32, S8), 6, bias=True, clip=(0, 127)),
        ops.requantize(ops.gemm(64, 64, 64, S8), 8, bias=True),
    ],
    ids=["gemm", "bmm", "c2d3x3", "c2d1x1s2", "bmm-epilogue", "gemm-epilogue"],
)
def test_template_generator_equals_group_by_group(compute):
    for params in _sampled(compute, 6, seed=4):
        fast = lowering_mod._Lowering(params, CFG).fast()  # no fallback to the loop here
        fast.validate()
        _same_program(fast, lowering_mod._Lowering(params, CFG).scalar())


def test_template_generator_raises_what_the_loop_raises(monkeypatch):
    """A candidate the hardware cannot hold fails with the same error either way."""
    monkeypatch.setattr(lowering_mod, "_FAST_MIN_GROUPS", 1)
    bad = [
        GemmParams(256, 16, 16, tile_m=256, tile_n=2, tile_k=16),  # INP tile over its SRAM
        GemmParams(64, 16, 4, tile_m=64, tile_n=16, tile_k=4),  # a kernel over 8192 micro-ops
        GemmParams(64, 4, 4, tile_m=8, tile_n=1, tile_k=1, vthreads=1, fold=1),
    ]
    for params in bad:
        got = []
        for fast in (True, False):
            monkeypatch.setattr(lowering_mod, "_FAST", fast)
            try:
                gemm_int32_program(params)
                got.append(None)
            except VTAProgramError as exc:
                got.append((type(exc), str(exc)))
        assert got[0] == got[1]
    assert got[0] is None or got[0][0] is not None


# -- vectorised encoding and validation ---------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(INSTRUCTIONS, min_size=1, max_size=40))
def test_vectorised_encoding_equals_encode(insns):
    table = InsnTable.from_instructions(insns)
    assert table.instructions() == tuple(insns)
    words = encode_table(table, CFG)
    assert [int(lo) | (int(hi) << 64) for lo, hi in words.tolist()] == [
        encode(i, CFG) for i in insns
    ]
    back = decode_table(words, CFG)
    assert back.instructions() == tuple(insns)


_small = st.integers(0, 40)
_hand_insn = st.one_of(
    st.builds(
        MemInsn,
        opcode=st.sampled_from([Opcode.LOAD, Opcode.STORE]),
        memory_type=st.sampled_from(list(MemId)),
        sram_base=st.integers(0, 2100),
        dram_base=_small,
        y_size=st.integers(0, 3),
        x_size=st.integers(0, 20),
        x_stride=st.integers(0, 20),
        y_pad_0=st.integers(0, 16),
        x_pad_1=st.integers(0, 2),
        **FLAGS,
    ),
    st.builds(
        AluInsn,
        alu_opcode=st.sampled_from(list(AluOp)),
        use_imm=st.booleans(),
        imm=st.integers(-40, 40),
        uop_bgn=st.integers(0, 9000),
        uop_end=st.integers(0, 9000),
        **FLAGS,
    ),
    st.builds(FinishInsn, **FLAGS),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_hand_insn, min_size=1, max_size=12))
def test_vectorised_validation_raises_what_the_loop_raises(insns):
    """The columns' checks raise the error of the first failing instruction, as a loop over
    every instruction does."""
    insns = [*insns, FinishInsn()]
    b = ProgramBuilder()
    b.alloc("x", "INP", (4, 1, 16))
    b.kernel([(0, 0, 0)] * 3)
    uops = np.array(b._uops, np.int64)
    ubuf = b.uop_buffer()
    program = Program(CFG, insns, dict(b.buffers), uops, b._top)
    want = None
    try:
        for pc, insn in enumerate(insns):
            _check_one(program, pc, insn)
    except VTAProgramError as exc:
        want = (type(exc), str(exc))
    got = None
    try:
        program.validate()
    except VTAProgramError as exc:
        got = (type(exc), str(exc))
    assert got == want
    assert ubuf.elem_base > 0


# -- the steady-state fast-forward ------------------------------------------------------------
PROFILES = (
    TimingParams(),
    TimingParams.chisel(),
    TimingParams(cmd_queue_depth=24, fetch_burst=64, read_row_overhead=32, dma_latency=40),
)


def test_fast_forward_equals_every_event():
    """Skipping repeated periods gives the report of simulating every event (and of the
    reference loop), on programs of many identical groups and batches."""
    computes = (
        ops.bmm(6, 64, 64, 64, S8),
        ops.gemm(256, 256, 256, S8),
        ops.requantize(ops.bmm(3, 32, 64, 32, S8), 6, bias=True, clip=(0, 127)),
        ops.c2d(1, 14, 14, 32, 32, 3, 3, 1, 1, dtype=S8),
    )
    skipped = 0
    for compute in computes:
        for params in _sampled(compute, 3, seed=11):
            program = gemm_int32_program(params)
            for t in PROFILES:
                fast = time_program_fast(program, t)
                assert fast == time_program_fast(program, t, fast_forward=False)
                if program.n_instructions <= 4000:
                    assert fast == _reference_timing(program, t)
                stats: dict[str, int] = {}
                _event_loop(program, program_columns(program, t), t, None, None, True, stats)
                skipped += stats["skipped_events"]
    assert skipped > 0


def test_fast_forward_keeps_the_event_budget():
    """A budget that runs out inside a skipped stretch stops at the same event, same cycle."""
    params = GemmParams(64, 4, 4, tile_m=4, tile_n=1, tile_k=1, vthreads=2, kind=1, batch=4)
    program = gemm_int32_program(params)
    full = time_program_fast(program, fast_forward=False)
    stats: dict[str, int] = {}
    t = TimingParams()
    _event_loop(program, program_columns(program, t), t, None, None, True, stats)
    n = program.n_instructions
    assert stats["skipped_events"] > n // 2  # most of the program is skipped
    for limit in (n // 4, n // 2, (3 * n) // 4):  # every instruction is at least one event
        msgs = []
        for ff in (True, False):
            with pytest.raises(VTATimeoutError) as info:
                time_program_fast(program, max_events=limit, fast_forward=ff)
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1]
    assert time_program_fast(program, max_events=10 * n) == full


def _outcomes(program, t, **kw):
    """(fast loop, fast loop simulating every event, reference): a report or (error type,
    message)."""
    got = []
    for run in (
        lambda: time_program_fast(program, t, **kw),
        lambda: time_program_fast(program, t, fast_forward=False, **kw),
        lambda: _reference_timing(program, t, **kw),
    ):
        try:
            got.append(run())
        except HeronlikeError as exc:
            got.append((type(exc), str(exc)))
    return got


def test_late_errors_are_the_reference_errors():
    """An error after a long steady stretch (a hazard, a token queue over its depth, a
    deadlock) is raised by the timing-only loop itself, as the reference raises it."""
    from heronlike.dla_targets.vta import Engine, Uop

    def program(tail: str):
        b = ProgramBuilder()
        good = b.kernel([Uop(0, 0, 0), Uop(1, 0, 0), Uop(2, 0, 0)])
        for _ in range(1500):
            b.gemm(good, iter_out=2, src=(1, 0))
            b.dep_push(Engine.COMPUTE, Engine.STORE)
            b.dep_pop(Engine.COMPUTE, Engine.STORE)
            b.emit(MemInsn(opcode=Opcode.STORE, memory_type=MemId.OUT))
        if tail == "hazard":
            b.gemm(b.kernel([Uop(5, 0, 0)]), iter_in=4, src=(0, 1))
        elif tail == "deadlock":
            b.dep_pop(Engine.LOAD, Engine.COMPUTE)
            b.gemm(good)
        elif tail == "overflow":
            for _ in range(40):
                b.dep_push(Engine.LOAD, Engine.COMPUTE)
        return b.finish(sync=tail != "late")

    for tail, kind in (
        ("hazard", "VTAHazardError"),
        ("deadlock", "VTADeadlockError"),
        ("overflow", "VTATokenError"),
    ):
        prog = program(tail)
        for t in (TimingParams(), TimingParams(token_queue_depth=30, cmd_queue_depth=16)):
            fast, every, ref = _outcomes(prog, t)
            assert fast == every == ref
            if tail != "overflow" or t.token_queue_depth == 30:
                assert fast[0].__name__ == kind, fast
            fast, every, ref = _outcomes(prog, t, max_events=prog.n_instructions)
            assert fast == every == ref and fast[0] is VTATimeoutError


_nop = st.builds(
    MemInsn,
    opcode=st.just(Opcode.LOAD),
    memory_type=st.sampled_from([MemId.INP, MemId.UOP]),
    **FLAGS,
) | st.builds(MemInsn, opcode=st.just(Opcode.STORE), memory_type=st.just(MemId.OUT), **FLAGS)


@settings(max_examples=120, deadline=None)
@given(st.lists(_nop, min_size=1, max_size=30), st.integers(2, 6), st.integers(1, 3))
def test_token_programs_give_the_reference_result(insns, queue_depth, token_depth):
    """Random token programs (valid flags only): same report or same error, word for word."""
    from heronlike.dla_targets.vta.isa import token_io
    from heronlike.errors import VTATokenError

    b = ProgramBuilder()
    for insn in insns:
        try:
            token_io(insn)
        except VTATokenError:
            continue
        b.emit(insn)
    b.emit(FinishInsn())
    program = b.build()
    t = TimingParams(cmd_queue_depth=queue_depth, token_queue_depth=token_depth, fetch_burst=4)
    fast, every, ref = _outcomes(program, t)
    assert fast == every == ref
