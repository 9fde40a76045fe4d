"""Our VTA model (dla_targets/vta): config, ISA encoding, bit-exact numerics, hazards, tokens and
the cycle model. numpy only; no TVM needed."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heronlike.dla_targets.vta import (
    AluInsn,
    AluOp,
    Engine,
    FinishInsn,
    GemmInsn,
    MemId,
    MemInsn,
    Opcode,
    ProgramBuilder,
    TimingParams,
    Uop,
    VTAConfig,
    check_fields,
    decode,
    decode_uop,
    encode,
    encode_uop,
    simulate,
    time_program,
)
from heronlike.dla_targets.vta.encoding import layout
from heronlike.dla_targets.vta.examples import (
    gemm_program,
    pack_gemm_operands,
    unpack_gemm_output,
)
from heronlike.dla_targets.vta.numerics import SRAM, execute_alu
from heronlike.dla_targets.vta.timing import PLAUSIBLE_RANGES, UNCALIBRATED, cost
from heronlike.errors import (
    HeronlikeError,
    VTAConfigError,
    VTADeadlockError,
    VTAFieldError,
    VTAHazardError,
    VTAProgramError,
    VTATokenError,
)

CFG = VTAConfig()
EPILOGUE = ((AluOp.SHR, 8), (AluOp.MIN, 127), (AluOp.MAX, 0))

sys.path.insert(0, str(Path(__file__).parent))  # the shared strategies module
from vta_strategies import INSTRUCTIONS, unsigned  # noqa: E402


def _rand_gemm(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    return a, w


def _reference(a, w, epilogue=EPILOGUE, bias=None):
    acc = a.astype(np.int32) @ w.astype(np.int32).T
    if bias is not None:
        acc = acc + bias.astype(np.int32)
    for op, imm in epilogue:
        acc = {
            AluOp.SHR: lambda x, s=imm: x >> s,
            AluOp.MIN: lambda x, s=imm: np.minimum(x, s),
            AluOp.MAX: lambda x, s=imm: np.maximum(x, s),
            AluOp.ADD: lambda x, s=imm: x + s,
        }[op](acc)
    return acc.astype(np.int8)  # STORE truncates (low 8 bits)


def _run_gemm(m, n, k, seed=0, epilogue=EPILOGUE, config=CFG, **tiles):
    a, w = _rand_gemm(m, n, k, seed)
    program = gemm_program(m, n, k, epilogue=epilogue, config=config, **tiles)
    result = simulate(program, pack_gemm_operands(a, w, config))
    return unpack_gemm_output(result.outputs["C"]), _reference(a, w, epilogue), result


# -- configuration ------------------------------------------------------------------------------
def test_default_config_matches_vta_config_json():
    assert (CFG.batch, CFG.block_in, CFG.block_out) == (1, 16, 16)
    assert (CFG.inp_dtype, CFG.wgt_dtype, CFG.acc_dtype) == (np.int8, np.int8, np.int32)
    assert {k: CFG.buffer_bytes(k) for k in ("UOP", "INP", "WGT", "ACC")} == {
        "UOP": 32 * 1024,
        "INP": 32 * 1024,
        "WGT": 256 * 1024,
        "ACC": 128 * 1024,
    }
    assert {k: CFG.elem_bytes(k) for k in ("UOP", "INP", "WGT", "ACC", "OUT")} == {
        "UOP": 4,
        "INP": 16,
        "WGT": 256,
        "ACC": 64,
        "OUT": 16,
    }
    assert {k: CFG.depth(k) for k in ("UOP", "INP", "WGT", "ACC", "OUT")} == {
        "UOP": 8192,
        "INP": 2048,
        "WGT": 1024,
        "ACC": 2048,
        "OUT": 2048,
    }
    assert (CFG.uop_index_bits, CFG.inp_index_bits, CFG.wgt_index_bits, CFG.acc_index_bits) == (
        13,
        11,
        10,
        11,
    )
    assert CFG.bus_bytes == 8 and CFG.clock_mhz == 100
    assert CFG.peak_gops == pytest.approx(51.2)  # 256 MAC/cycle × 2 × 100 MHz
    assert CFG.peak_dram_gbps == pytest.approx(0.8)


def test_config_json_round_trip(tmp_path):
    path = tmp_path / "vta_config.json"
    cfg = VTAConfig(LOG_BATCH=1, LOG_ACC_BUFF_SIZE=16, clock_mhz=333.0, log_bus_width=7)
    cfg.to_json(path)
    data = json.loads(path.read_text())
    assert data["LOG_BATCH"] == 1 and data["LOG_BLOCK"] == 4 and data["fpga_freq"] == 333.0
    assert VTAConfig.from_json(path) == cfg
    assert VTAConfig.from_json(cfg.to_json()) == cfg
    old_style = {"TARGET": "pynq", "LOG_BLOCK_IN": 4, "LOG_BLOCK_OUT": 4, "LOG_INP_WIDTH": 3}
    assert VTAConfig.from_json(old_style) == VTAConfig(TARGET="pynq")


@pytest.mark.parametrize(
    "bad",
    [
        {"LOG_INP_WIDTH": 2},  # int4: not modelled
        {"LOG_ACC_WIDTH": 3, "LOG_INP_WIDTH": 4},
        {"LOG_WGT_BUFF_SIZE": 7},  # smaller than one 256-byte weight block
        {"LOG_BATCH": -1},
        {"LOG_BLOCK_IN": 4, "LOG_BLOCK_OUT": 3},
        {"NOT_A_KEY": 1},
        {"fpga_freq": 0},
    ],
)
def test_config_rejects_bad_values(bad):
    with pytest.raises(VTAConfigError):
        VTAConfig.from_json(bad)
    assert issubclass(VTAConfigError, HeronlikeError)


# -- fields, encoding -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("insn", "field", "width"),
    [
        (GemmInsn(iter_out=1 << 14), "iter_out", 14),
        (GemmInsn(uop_end=1 << 14), "uop_end", 14),
        (GemmInsn(uop_bgn=8192), "uop_bgn", 13),
        (GemmInsn(dst_factor_in=2048), "dst_factor_in", 11),
        (GemmInsn(wgt_factor_out=1024), "wgt_factor_out", 10),
        (AluInsn(imm=1 << 15), "imm", 16),
        (AluInsn(imm=-(1 << 15) - 1), "imm", 16),
        (AluInsn(src_factor_in=-1), "src_factor_in", 11),
        (MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, y_pad_0=16), "y_pad_0", 4),
        (MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, x_size=1 << 16), "x_size", 16),
        (MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, dram_base=1 << 32), "dram_base", 32),
        (MemInsn(opcode=Opcode.STORE, memory_type=MemId.OUT, sram_base=1 << 16), "sram_base", 16),
    ],
)
def test_field_too_wide_raises_typed_error(insn, field, width):
    for check in (lambda: check_fields(insn, CFG), lambda: encode(insn, CFG)):
        with pytest.raises(VTAFieldError) as info:
            check()
        assert (info.value.field, info.value.width) == (field, width)
        assert field in str(info.value) and f"{width}-bit" in str(info.value)
        again = pickle.loads(pickle.dumps(info.value))  # crosses process pools intact
        assert (again.field, again.width, str(again)) == (field, width, str(info.value))


def test_uop_field_widths():
    assert decode_uop(encode_uop(Uop(2047, 2047, 1023), CFG), CFG) == Uop(2047, 2047, 1023)
    for uop, field, width in [
        (Uop(2048, 0, 0), "dst_idx", 11),
        (Uop(0, 2048, 0), "src_idx", 11),
        (Uop(0, 0, 1024), "wgt_idx", 10),
    ]:
        with pytest.raises(VTAFieldError) as info:
            encode_uop(uop, CFG)
        assert (info.value.field, info.value.width) == (field, width)


def test_instruction_sizes_match_the_isa():
    bits = {op: sum(w for _, w, _ in layout(op, CFG)) for op in Opcode}
    assert bits == {
        Opcode.LOAD: 122,
        Opcode.STORE: 122,
        Opcode.GEMM: 127,
        Opcode.ALU: 127,
        Opcode.FINISH: 7,
    }


@settings(max_examples=300, deadline=None)
@given(INSTRUCTIONS)
def test_encode_decode_round_trip(insn):
    word = encode(insn, CFG)
    assert 0 <= word < 1 << 128
    assert decode(word, CFG) == insn


@settings(max_examples=100, deadline=None)
@given(st.builds(Uop, unsigned(11), unsigned(11), unsigned(10)))
def test_uop_round_trip(uop):
    word = encode_uop(uop, CFG)
    assert 0 <= word < 1 << 32 and decode_uop(word, CFG) == uop


def test_decode_rejects_garbage():
    for word in (5, 6, 7, -1, 1 << 128, Opcode.FINISH | (1 << 20)):
        with pytest.raises(VTAProgramError):
            decode(word, CFG)


# -- bit-exact numerics ---------------------------------------------------------------------
def test_single_tile_gemm_bit_exact_with_truncating_store():
    """1×16 · (16×16)ᵀ by hand with the builder: no epilogue, the int32 result truncated."""
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (1, 16, 16), dtype=np.int8)
    b = ProgramBuilder()
    xb, wb = b.alloc("x", "INP", (1, 1, 16)), b.alloc("w", "WGT", (1, 16, 16))
    yb = b.alloc("y", "OUT", (1, 1, 16))
    k = b.kernel([Uop(0, 0, 0)])
    b.load(xb, sram_base=0, y_size=1, x_size=1)
    b.load(wb, sram_base=0, y_size=1, x_size=1)
    b.dep_push(Engine.LOAD, Engine.COMPUTE)
    b.dep_pop(Engine.LOAD, Engine.COMPUTE)
    b.gemm(k, reset=True)
    b.gemm(k)
    b.dep_push(Engine.COMPUTE, Engine.STORE)
    b.dep_pop(Engine.COMPUTE, Engine.STORE)
    b.store(yb, sram_base=0, y_size=1, x_size=1)
    program = b.finish()
    result = simulate(program, {"x": x, "w": w})
    full = x[0].astype(np.int32) @ w[0].astype(np.int32).T
    assert np.abs(full).max() > 127  # the truncation is exercised
    np.testing.assert_array_equal(result.outputs["y"][0], full.astype(np.int8))
    assert result.report.gemm_uops == 1 and result.report.ops == 512


@pytest.mark.parametrize(
    "tiles",
    [
        {"tile_m": 64, "tile_n": 4, "tile_k": 4},  # one resident tile (vta.md §4.3 example)
        {"tile_m": 64, "tile_n": 4, "tile_k": 4, "fold_m": True},
        {"tile_m": 16, "tile_n": 2, "tile_k": 2},
        {"tile_m": 16, "tile_n": 2, "tile_k": 2, "vthreads": 2},
        {"tile_m": 8, "tile_n": 1, "tile_k": 4, "vthreads": 2, "fold_m": True},
    ],
)
def test_blocked_gemm_64_with_shift_clip_epilogue_bit_exact(tiles):
    got, want, _ = _run_gemm(64, 64, 64, **tiles)
    np.testing.assert_array_equal(got, want)
    assert 0 < np.count_nonzero(want) < want.size  # the clip is exercised both ways


@settings(max_examples=25, deadline=None)
@given(
    tile_m=st.sampled_from([2, 4, 8, 16, 32, 64]),
    tile_n=st.sampled_from([1, 2, 4]),
    tile_k=st.sampled_from([1, 2, 4]),
    vthreads=st.sampled_from([1, 2]),
    fold_m=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_tilings_bit_exact_and_within_bounds(tile_m, tile_n, tile_k, vthreads, fold_m, seed):
    tiles = (64 // tile_m) * (4 // tile_n)
    if tile_m * tile_n < 3 or tiles % vthreads:
        return  # the hazard and the thread split have their own tests
    got, want, res = _run_gemm(
        64,
        64,
        64,
        seed,
        tile_m=tile_m,
        tile_n=tile_n,
        tile_k=tile_k,
        vthreads=vthreads,
        fold_m=fold_m,
    )
    np.testing.assert_array_equal(got, want)
    r = res.report
    assert r.lower_bound_cycles <= r.cycles <= r.serial_cycles and r.gops < r.peak_gops


def test_gemm_with_bias_and_non_square_shapes():
    m, n, k = 32, 48, 80
    a, w = _rand_gemm(m, n, k, seed=3)
    bias = np.random.default_rng(4).integers(-(1 << 12), 1 << 12, n, dtype=np.int32)
    program = gemm_program(m, n, k, tile_m=8, tile_n=3, tile_k=5, vthreads=2, bias=True)
    inputs = pack_gemm_operands(a, w) | {"bias": bias.reshape(n // 16, 1, 16)}
    got = unpack_gemm_output(simulate(program, inputs).outputs["C"])
    np.testing.assert_array_equal(got, _reference(a, w, bias=bias))


def test_other_configuration_batch2_block8():
    cfg = VTAConfig(LOG_BATCH=1, LOG_BLOCK=3, LOG_WGT_BUFF_SIZE=16)
    got, want, res = _run_gemm(16, 32, 24, config=cfg, tile_m=4, tile_n=2, tile_k=3)
    np.testing.assert_array_equal(got, want)
    assert res.report.peak_gops == pytest.approx(2 * 8 * 8 * 2 * 100 / 1e3)


def test_load_padding_and_strided_window():
    """A padded 2-D load (pads 1, 2, 3, 15) of a 3×2 window with row stride 5, read back through
    an identity GEMM: SRAM holds np.pad of the window, densely."""
    rng = np.random.default_rng(5)
    src = rng.integers(-128, 128, (4, 5, 1, 16), dtype=np.int8)
    y0, y1, x0, x1 = 1, 2, 3, 15
    rows, cols = y0 + 3 + y1, x0 + 2 + x1
    n = rows * cols
    b = ProgramBuilder()
    xb = b.alloc("x", "INP", (4, 5, 1, 16))
    wb = b.alloc("eye", "WGT", (1, 16, 16))
    yb = b.alloc("y", "OUT", (n, 1, 16))
    b.load(xb, sram_base=7, y_size=3, x_size=2, x_stride=5, at=(1, 2), pad=(y0, y1, x0, x1))
    b.load(wb, sram_base=0, y_size=1, x_size=1)
    b.dep_push(Engine.LOAD, Engine.COMPUTE)
    b.dep_pop(Engine.LOAD, Engine.COMPUTE)
    k = b.kernel([Uop(0, 7, 0)])
    b.gemm(k, iter_in=n, dst=(0, 1), reset=True)
    b.gemm(k, iter_in=n, dst=(0, 1), src=(0, 1))
    b.dep_push(Engine.COMPUTE, Engine.STORE)
    b.dep_pop(Engine.COMPUTE, Engine.STORE)
    b.store(yb, sram_base=0, y_size=1, x_size=n)
    program = b.finish()
    out = simulate(program, {"x": src, "eye": np.eye(16, dtype=np.int8)[None]}).outputs["y"]
    want = np.pad(src[1:4, 2:4], ((y0, y1), (x0, x1), (0, 0), (0, 0)))
    np.testing.assert_array_equal(out.reshape(rows, cols, 1, 16), want)
    # padding is zero-filled on chip, not moved over the bus: 6 payload elements of 16 bytes
    report = time_program(program)
    assert report.bytes_by_counter["inp_load_nbytes"] == 6 * 16


def test_padding_over_15_and_padded_store_rejected():
    b = ProgramBuilder()
    xb = b.alloc("x", "INP", (4, 1, 16))
    with pytest.raises(VTAFieldError, match="x_pad_1"):
        b.load(xb, sram_base=0, y_size=1, x_size=4, pad=(0, 0, 0, 16))
        b.finish()
    b = ProgramBuilder()
    yb = b.alloc("y", "OUT", (4, 1, 16))
    b.emit(
        MemInsn(
            opcode=Opcode.STORE,
            memory_type=MemId.OUT,
            dram_base=yb.elem_base,
            y_size=1,
            x_size=2,
            x_stride=2,
            y_pad_0=1,
        )
    )
    with pytest.raises(VTAProgramError, match="cannot pad"):
        b.finish()


def test_sram_and_dram_bounds_rejected():
    b = ProgramBuilder()
    xb = b.alloc("x", "INP", (4096, 1, 16))
    b.load(xb, sram_base=2000, y_size=1, x_size=100)  # INP depth is 2048
    with pytest.raises(VTAProgramError, match="exceeds its depth"):
        b.finish()
    b = ProgramBuilder()
    xb = b.alloc("x", "INP", (4, 1, 16))
    b.emit(
        MemInsn(
            opcode=Opcode.LOAD,
            memory_type=MemId.INP,
            dram_base=10**6,
            y_size=1,
            x_size=1,
            x_stride=1,
        )
    )
    with pytest.raises(VTAProgramError, match="DRAM"):
        b.finish()
    b = ProgramBuilder()  # a micro-op index beyond the buffer shows up when expanded
    b.gemm(b.kernel([Uop(2000, 0, 0)]), iter_in=100, dst=(0, 1), reset=True)
    with pytest.raises(VTAProgramError, match="dst index"):
        time_program(b.finish())


def test_alu_semantics_full_int32():
    """ALU ops on the int32 accumulator, checked before truncation: SHR by a negative amount
    shifts left, ADD/MUL wrap, MIN/MAX with a tensor operand, a sequential chain."""
    b = ProgramBuilder()
    program = b.finish()
    rng = np.random.default_rng(6)
    values = rng.integers(-(2**31), 2**31, (8, 1, 16), dtype=np.int64).astype(np.int32)
    cases = [
        (AluOp.SHR, 3, lambda a: a >> 3),
        (AluOp.SHR, -4, lambda a: (a.astype(np.int64) << 4).astype(np.int32)),
        (AluOp.ADD, 32767, lambda a: (a.astype(np.int64) + 32767).astype(np.int32)),
        (AluOp.MUL, -300, lambda a: (a.astype(np.int64) * -300).astype(np.int32)),
        (AluOp.MIN, -5, lambda a: np.minimum(a, -5)),
        (AluOp.MAX, 7, lambda a: np.maximum(a, 7)),
    ]
    for op, imm, ref in cases:
        sram = SRAM(program)
        sram.acc[:8] = values
        dst = np.arange(8)
        execute_alu(sram, AluInsn(alu_opcode=op, use_imm=True, imm=imm), dst, dst)
        np.testing.assert_array_equal(sram.acc[:8], ref(values), err_msg=op.name)
    for op, ref in [(AluOp.MIN, np.minimum), (AluOp.MAX, np.maximum)]:
        sram = SRAM(program)
        sram.acc[:8] = values
        execute_alu(sram, AluInsn(alu_opcode=op), np.arange(4), np.arange(4, 8))
        np.testing.assert_array_equal(sram.acc[:4], ref(values[:4], values[4:]))
    sram = SRAM(program)  # a chain acc[i+1] = acc[i+1] + acc[i]: prefix sums, in order
    sram.acc[:8] = 1
    execute_alu(sram, AluInsn(alu_opcode=AluOp.ADD), np.arange(1, 8), np.arange(0, 7))
    np.testing.assert_array_equal(sram.acc[:8, 0, 0], np.arange(1, 9))


def test_acc_8bit_load_sign_extends_and_alu_program():
    """ACC_8BIT bias load + ALU ADD (tensor operand) + SHR by a negative immediate, end to end."""
    rng = np.random.default_rng(7)
    v = rng.integers(-128, 128, (2, 1, 16), dtype=np.int8)
    b = ProgramBuilder()
    vb = b.alloc("v", "ACC_8BIT", (2, 1, 16))
    yb = b.alloc("y", "OUT", (1, 1, 16))
    b.load(vb, sram_base=0, y_size=1, x_size=2)  # compute engine
    b.alu(AluOp.ADD, b.kernel([Uop(0, 1, 0)]))
    b.alu(AluOp.SHR, b.kernel([Uop(0, 0, 0)]), imm=-1)
    b.dep_push(Engine.COMPUTE, Engine.STORE)
    b.dep_pop(Engine.COMPUTE, Engine.STORE)
    b.store(yb, sram_base=0, y_size=1, x_size=1)
    out = simulate(b.finish(), {"v": v}).outputs["y"]
    want = ((v[0].astype(np.int32) + v[1]) << 1).astype(np.int8)
    np.testing.assert_array_equal(out[0], want)


# -- hazards and the token protocol -----------------------------------------------------------
def test_waw_hazard_detected_in_expanded_stream():
    # two outputs per tile and k innermost: acc[0], acc[1], acc[0], ... (distance 2)
    program = gemm_program(16, 32, 32, tile_m=1, tile_n=2, tile_k=2, epilogue=())
    with pytest.raises(VTAHazardError, match="2 apart"):
        time_program(program)
    # a folded loop on one address (dst factor 0): distance 1, in both modes
    b = ProgramBuilder()
    b.gemm(b.kernel([Uop(0, 0, 0)]), iter_in=4, src=(0, 1))
    program = b.finish()
    for run in (lambda: time_program(program), lambda: simulate(program)):
        with pytest.raises(VTAHazardError, match="1 apart") as info:
            run()
        assert "instruction" in str(info.value)
    # three distinct destinations are enough (distance 3)
    got, want, _ = _run_gemm(16, 48, 32, tile_m=1, tile_n=3, tile_k=2)
    np.testing.assert_array_equal(got, want)


def _hand(insns, **timing):
    b = ProgramBuilder()
    for insn in insns:
        b.emit(insn)
    b.emit(FinishInsn())
    return b.build(), TimingParams(**timing)


_NOP_L = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP)
_NOP_C = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.UOP)
_NOP_S = MemInsn(opcode=Opcode.STORE, memory_type=MemId.OUT)


def test_deadlock_detected():
    # compute waits for a load→compute token nobody pushes
    program, t = _hand([MemInsn(opcode=Opcode.LOAD, memory_type=MemId.UOP, pop_prev=True)])
    with pytest.raises(VTADeadlockError, match="compute engine waits at instruction 0.*L2G"):
        time_program(program, t)
    # a cycle: load waits for compute, compute waits for load
    program, t = _hand(
        [
            MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, pop_next=True, push_next=True),
            MemInsn(opcode=Opcode.LOAD, memory_type=MemId.UOP, pop_prev=True, push_prev=True),
        ]
    )
    with pytest.raises(VTADeadlockError, match="load engine"):
        simulate(program, timing=t)


def test_full_command_queue_deadlocks_like_hardware():
    """Compute waits for a token from a load placed after more compute instructions than its
    command queue holds: fetch can never reach the load."""
    insns = [MemInsn(opcode=Opcode.LOAD, memory_type=MemId.UOP, pop_prev=True)]
    # the first is dequeued (and waits); 9 more overflow a queue of 8 before fetch sees the load
    insns += [_NOP_C] * 9 + [MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, push_next=True)]
    program, t = _hand(insns, cmd_queue_depth=8)
    with pytest.raises(VTADeadlockError, match="command queue"):
        time_program(program, t)
    program, t = _hand(insns, cmd_queue_depth=16)
    assert time_program(program, t).cycles > 0


def test_token_protocol_errors():
    # a token pushed and never popped
    program, t = _hand([MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, push_next=True)])
    with pytest.raises(VTATokenError, match="L2G"):
        time_program(program, t)
    # a flag the engine has no queue for (the load engine has no "prev")
    program = ProgramBuilder()
    program.emit(MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, pop_prev=True))
    with pytest.raises(VTATokenError, match="pop_prev"):
        program.finish(sync=False)
    # a store still running at FINISH: the program does not wait for it
    b = ProgramBuilder()
    yb = b.alloc("y", "OUT", (4, 1, 16))
    b.store(yb, sram_base=0, y_size=1, x_size=4)
    with pytest.raises(VTATokenError, match="after FINISH"):
        time_program(b.finish(sync=False))
    assert time_program(_store_only(sync=True)).cycles > 0
    # only neighbouring engines have queues
    with pytest.raises(VTAProgramError):
        ProgramBuilder().dep_push(Engine.LOAD, Engine.STORE)


def _store_only(sync):
    b = ProgramBuilder()
    yb = b.alloc("y", "OUT", (4, 1, 16))
    b.store(yb, sram_base=0, y_size=1, x_size=4)
    return b.finish(sync=sync)


def test_finish_must_be_last():
    b = ProgramBuilder()
    b.emit(FinishInsn())
    b.emit(_NOP_C)
    b.emit(FinishInsn())
    with pytest.raises(VTAProgramError, match="FINISH"):
        b.build()


# -- cycle model --------------------------------------------------------------------------------
def test_costs_reproduce_the_worked_example():
    """vta.md §4.3 worked example (L_dma 22, r_row 0, d_in 0)."""
    t = TimingParams(read_row_overhead=0, write_row_overhead=0, loop_refill=0)
    load = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.INP, y_size=64, x_size=4, x_stride=4)
    wload = MemInsn(opcode=Opcode.LOAD, memory_type=MemId.WGT, y_size=4, x_size=4, x_stride=4)
    store = MemInsn(opcode=Opcode.STORE, memory_type=MemId.OUT, y_size=64, x_size=4, x_stride=4)
    reset = GemmInsn(reset=True, uop_end=4, iter_in=64)
    gemm = GemmInsn(uop_end=256, iter_out=4)
    alu = AluInsn(uop_end=256, use_imm=True, imm=8, alu_opcode=AluOp.SHR)
    got = [cost(i, CFG, t).total for i in (reset, load, wload, gemm, alu, store)]
    assert got == [262, 534, 534, 1030, 518, 534]
    assert cost(load, CFG, t).beats == 512  # 4 KiB at 8 bytes per cycle
    padded = MemInsn(
        opcode=Opcode.LOAD, memory_type=MemId.INP, y_size=2, x_size=2, x_stride=2, x_pad_0=1
    )
    assert cost(padded, CFG, t).total == 22 + 2 * 4 + 2  # two zero-filled elements
    # the PYNQ HLS default pays the loop re-entries; Chisel does not, and its ALU-imm II is 1
    assert cost(reset, CFG, TimingParams()).total == 262 + 4 * 63
    assert cost(alu, CFG, TimingParams.chisel()).total == 6 + 256


def test_every_uncalibrated_constant_is_named_with_a_range():
    names = {f for f in TimingParams.__dataclass_fields__}
    assert set(UNCALIBRATED) <= names and set(PLAUSIBLE_RANGES) == set(UNCALIBRATED)
    for name, (lo, hi) in PLAUSIBLE_RANGES.items():
        assert lo <= getattr(TimingParams(), name) <= hi, name
        assert name in TimingParams.__doc__
    with pytest.raises(VTAConfigError):
        TimingParams(dma_latency=-1)


def test_timing_only_gives_the_same_cycles():
    for tiles in (
        {"tile_m": 16, "tile_n": 2, "tile_k": 2, "vthreads": 2},
        {"tile_m": 64, "tile_n": 4, "tile_k": 4},
    ):
        program = gemm_program(64, 64, 64, **tiles)
        a, w = _rand_gemm(64, 64, 64)
        full = simulate(program, pack_gemm_operands(a, w))
        fast = simulate(program, timing_only=True)
        assert fast.report == full.report and fast.outputs == {} and fast.dram is None


def test_virtual_threads_overlap_load_and_compute():
    tiles = {"tile_m": 16, "tile_n": 2, "tile_k": 2}
    one = time_program(gemm_program(64, 64, 64, vthreads=1, **tiles))
    two = time_program(gemm_program(64, 64, 64, vthreads=2, **tiles))
    assert two.cycles < one.cycles
    assert two.engines["compute"].token_stall_cycles < one.engines["compute"].token_stall_cycles
    # a compute-heavier tiling gains more
    tiles = {"tile_m": 64, "tile_n": 4, "tile_k": 2}
    one = time_program(gemm_program(128, 128, 128, vthreads=1, **tiles))
    two = time_program(gemm_program(128, 128, 128, vthreads=2, **tiles))
    assert two.cycles < 0.9 * one.cycles


@pytest.mark.parametrize(
    "shape_tiles",
    [
        ((64, 64, 64), {"tile_m": 64, "tile_n": 4, "tile_k": 4}),
        ((64, 64, 64), {"tile_m": 16, "tile_n": 2, "tile_k": 2, "vthreads": 2}),
        ((128, 128, 128), {"tile_m": 32, "tile_n": 4, "tile_k": 4, "vthreads": 2}),
        ((128, 64, 256), {"tile_m": 128, "tile_n": 2, "tile_k": 8, "fold_m": True}),
    ],
)
def test_cycles_between_analytic_bounds(shape_tiles):
    shape, tiles = shape_tiles
    for t in (
        TimingParams(),
        TimingParams.chisel(),
        TimingParams(read_row_overhead=32, dma_latency=40),
    ):
        r = time_program(gemm_program(*shape, **tiles), t)
        assert r.lower_bound_cycles <= r.cycles <= r.serial_cycles
        assert r.bus_busy_cycles <= r.cycles
        for e in r.engines.values():
            assert min(e.busy_cycles, e.token_stall_cycles, e.bus_stall_cycles, e.idle_cycles) >= 0
        assert r.gops <= r.peak_gops


def test_cycles_monotone_in_work_and_constants():
    tiles = {"tile_m": 16, "tile_n": 2, "tile_k": 2, "vthreads": 2}
    by_k = [time_program(gemm_program(64, 64, k, **tiles)).cycles for k in (32, 64, 128, 256)]
    assert by_k == sorted(by_k) and len(set(by_k)) == 4
    program = gemm_program(64, 64, 64, **tiles)
    for name, (lo, hi) in PLAUSIBLE_RANGES.items():
        if name == "fetch_burst":
            continue  # bigger bursts trade latency for fewer requests: not monotone by design
        cycles = [time_program(program, TimingParams().with_(**{name: v})).cycles for v in (lo, hi)]
        assert cycles[0] <= cycles[1], name


def test_compute_bound_gemm_approaches_but_never_exceeds_peak():
    tiles = {"tile_m": 128, "tile_n": 8, "tile_k": 8, "vthreads": 2}
    r = time_program(gemm_program(512, 256, 512, epilogue=(), **tiles))
    assert r.gemm_uops == 512 * 256 * 512 // 256 and r.ops == 2 * 512 * 256 * 512
    assert 0.75 * r.peak_gops < r.gops < r.peak_gops
    assert r.engines["compute"].busy_cycles > 0.9 * r.cycles
    # small tiles on the same GEMM: many short DMA rows, bound by the load engine, far below
    slow = time_program(
        gemm_program(512, 256, 512, epilogue=(), tile_m=8, tile_n=2, tile_k=2, vthreads=2)
    )
    assert slow.gops < 0.5 * r.gops and slow.engines["load"].busy_cycles > 0.9 * slow.cycles


def test_report_counters():
    got, want, res = _run_gemm(64, 64, 64, tile_m=16, tile_n=2, tile_k=2, vthreads=2)
    r = res.report
    c = r.bytes_by_counter
    assert c["inp_load_nbytes"] == 64 * 64 * (64 // 32)  # A is read once per column tile (2)
    assert c["out_store_nbytes"] == r.dram_write_bytes == 64 * 64
    assert r.dram_read_bytes == sum(v for k, v in c.items() if k.endswith("load_nbytes"))
    assert r.gemm_uops == 64 * 4 * 4 and r.alu_uops == 3 * 64 * 4
    assert r.seconds == pytest.approx(r.cycles / 100e6)
    assert "GOPS" in r.summary()


def test_target_discovery_finds_vta():
    from heronlike.target import available_targets

    found = available_targets()
    assert found["vta"].__name__ == "VTATarget"
    assert "dlboost" in found and "tensorcore" in found
