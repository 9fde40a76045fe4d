"""Functional (bit-exact) semantics of each VTA instruction on numpy SRAMs and a DRAM image.

Semantics restated from vta.md §2.3, §2.4 and §4.2 item 5 (fsim ``sim_driver.cc``, HLS
``vta.cc``):

* LOAD: 2-D strided copy DRAM → SRAM, written densely; padded elements are zero. ACC_8BIT
  sign-extends int8 into the accumulator.
* GEMM: ``acc[dst] += int32(inp[src]) @ int32(wgt[wgt]).T``, wrapping in two's complement;
  ``reset`` writes zeros.
* ALU: ``acc[dst] = op(acc[dst], imm or acc[src])`` lane-wise, int32 wrap-around; SHR by a
  negative amount shifts left; ``reset`` writes zeros.
* STORE: the accumulator truncated to the output width (low bits, no saturation), as fsim's
  ``TruncStore`` (fsim reads ACC directly; the HLS OUT buffer mirrors it after GEMM/ALU).

Micro-ops are read from the program's micro-op table (the DRAM image holds the same table
encoded), so the timing-only mode needs no DRAM image.
"""

from __future__ import annotations

import numpy as np

from .isa import AluInsn, AluOp, GemmInsn, MemId, MemInsn, Opcode
from .program import UOP_BUFFER, Program


class SRAM:
    """The on-chip buffers: ``inp (depth, BATCH, BLOCK_IN)``, ``wgt (depth, BLOCK_OUT, BLOCK_IN)``,
    ``acc (depth, BATCH, BLOCK_OUT)`` in the config's dtypes, and ``uop (depth, 3)`` int64.

    In timing-only mode only ``uop`` is allocated (``data=False``).
    """

    def __init__(self, program: Program, *, data: bool = True) -> None:
        cfg = program.config
        self.program = program
        self.uop = np.zeros((cfg.depth("UOP"), 3), dtype=np.int64)
        self.uop_version = 0  # bumped by every UOP load (keys the expansion cache)
        if data:
            self.inp = np.zeros((cfg.depth("INP"), *cfg.elem_shape("INP")), cfg.inp_dtype)
            self.wgt = np.zeros((cfg.depth("WGT"), *cfg.elem_shape("WGT")), cfg.wgt_dtype)
            self.acc = np.zeros((cfg.depth("ACC"), *cfg.elem_shape("ACC")), cfg.acc_dtype)

    def load_uops(self, insn: MemInsn) -> None:
        """LOAD UOP: copy ``x_size`` micro-ops from the micro-op table (timing and full mode)."""
        if insn.is_nop:
            return
        lo = insn.dram_base - self.program.buffers[UOP_BUFFER].elem_base
        self.uop[insn.sram_base : insn.sram_base + insn.x_size] = self.program.uops[
            lo : lo + insn.x_size
        ]
        self.uop_version += 1


def _dram_rows(dram: np.ndarray, insn: MemInsn, elem_bytes: int) -> np.ndarray:
    """A ``(y_size, x_size, elem_bytes)`` uint8 view of the strided DRAM region."""
    start = insn.dram_base * elem_bytes
    return np.lib.stride_tricks.as_strided(
        dram[start:],
        shape=(insn.y_size, insn.x_size, elem_bytes),
        strides=(insn.x_stride * elem_bytes, elem_bytes, 1),
        writeable=False,
    )


def execute_load(sram: SRAM, dram: np.ndarray, insn: MemInsn) -> None:
    """LOAD of INP, WGT, ACC or ACC_8BIT (UOP goes through :meth:`SRAM.load_uops`)."""
    if insn.is_nop:
        return
    cfg = sram.program.config
    kind = insn.memory_type.name
    target = {MemId.INP: sram.inp, MemId.WGT: sram.wgt}.get(insn.memory_type, sram.acc)
    dtype = cfg.elem_dtype(kind).newbyteorder("<")
    raw = _dram_rows(dram, insn, cfg.elem_bytes(kind))
    data = (
        np.ascontiguousarray(raw).view(dtype).reshape(insn.y_size, insn.x_size, *target.shape[1:])
    )
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    block = np.zeros((rows, cols, *target.shape[1:]), dtype=target.dtype)
    block[insn.y_pad_0 : insn.y_pad_0 + insn.y_size, insn.x_pad_0 : insn.x_pad_0 + insn.x_size] = (
        data
    )
    target[insn.sram_base : insn.sram_base + rows * cols] = block.reshape(
        rows * cols, *target.shape[1:]
    )


def execute_store(sram: SRAM, dram: np.ndarray, insn: MemInsn) -> None:
    """STORE: accumulator rows truncated to the output dtype, written strided to DRAM."""
    if insn.is_nop:
        return
    cfg = sram.program.config
    n = insn.y_size * insn.x_size
    out = sram.acc[insn.sram_base : insn.sram_base + n].astype(cfg.out_dtype)  # wraps: low bits
    out = out.astype(cfg.out_dtype.newbyteorder("<")).view(np.uint8)
    elem = cfg.elem_bytes("OUT")
    out = out.reshape(insn.y_size, insn.x_size * elem)
    for r in range(insn.y_size):
        start = (insn.dram_base + r * insn.x_stride) * elem
        dram[start : start + insn.x_size * elem] = out[r]


def execute_gemm(
    sram: SRAM, insn: GemmInsn, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray
) -> None:
    """GEMM over expanded indices (from :func:`~.hazards.expand`)."""
    if not dst.size:
        return
    if insn.reset:
        sram.acc[dst] = 0
        return
    acc_t = sram.acc.dtype
    prod = np.matmul(sram.inp[src].astype(acc_t), sram.wgt[wgt].astype(acc_t).transpose(0, 2, 1))
    np.add.at(sram.acc, dst, prod)  # int32 addition wraps and is associative: order-free


def _alu(op: AluOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One ALU op lane-wise on accumulator-typed arrays, wrapping like hardware integers."""
    if op == AluOp.MIN:
        return np.minimum(a, b)
    if op == AluOp.MAX:
        return np.maximum(a, b)
    if op == AluOp.ADD:
        return a + b
    if op == AluOp.MUL:
        return a * b
    bits = a.dtype.itemsize * 8
    b = b.astype(a.dtype)
    right = np.right_shift(a, np.clip(b, 0, bits - 1))
    left = np.left_shift(a, np.clip(-b, 0, bits - 1))
    return np.where(b >= 0, right, left)


def execute_alu(sram: SRAM, insn: AluInsn, dst: np.ndarray, src: np.ndarray) -> None:
    """ALU over expanded indices, in micro-op order where order matters.

    Micro-ops run vectorised when no destination repeats and no micro-op reads a destination
    another one writes; otherwise one at a time (a chain such as a max-reduction).
    """
    if not dst.size:
        return
    acc = sram.acc
    if insn.reset:
        acc[dst] = 0
        return
    with np.errstate(over="ignore"):
        if insn.use_imm:
            b = np.array(insn.imm, dtype=acc.dtype)
            uniq = np.unique(dst).size == dst.size
            if uniq:
                acc[dst] = _alu(insn.alu_opcode, acc[dst], b)
            else:
                for d in dst:
                    acc[d] = _alu(insn.alu_opcode, acc[d], b)
            return
        reads_written = np.isin(src, dst) & (src != dst)
        if np.unique(dst).size == dst.size and not reads_written.any():
            acc[dst] = _alu(insn.alu_opcode, acc[dst], acc[src])
        else:
            for d, s in zip(dst.tolist(), src.tolist()):
                acc[d] = _alu(insn.alu_opcode, acc[d], acc[s])


def execute(
    sram: SRAM,
    dram: np.ndarray,
    insn: MemInsn | GemmInsn | AluInsn,
    expanded: tuple[np.ndarray, ...] | None,
) -> None:
    """Run one instruction's data effect (FINISH has none)."""
    if isinstance(insn, MemInsn):
        if insn.opcode == Opcode.STORE:
            execute_store(sram, dram, insn)
        elif insn.memory_type == MemId.UOP:
            sram.load_uops(insn)
        else:
            execute_load(sram, dram, insn)
    elif isinstance(insn, GemmInsn):
        execute_gemm(sram, insn, *expanded)
    elif isinstance(insn, AluInsn):
        execute_alu(sram, insn, expanded[0], expanded[1])
