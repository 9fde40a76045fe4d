"""Micro-op expansion and the checks on it: SRAM index bounds and the accumulator hazard.

**Accumulator write-after-write hazard** (vta.md §2.2, §2.5). The GEMM micro-op loop is
pipelined at II = 1 and the HLS design declares no inter-iteration dependence on the
accumulator (``HLS DEPENDENCE variable=acc_mem inter false``); BRAM needs two cycles before a
write is visible to a read, so a micro-op must not read-modify-write an accumulator address that
one of the two micro-ops before it wrote. ``runtime.cc`` ``UopKernel::VerifyDep`` enforces this
on the unrolled kernel (a dst_idx may not equal either of the two previous ones); we check the
whole *expanded* stream of each GEMM (folded iter_out/iter_in loops included), as vta.md §2.5
recommends. A repeat is legal only :data:`ACC_WAW_MIN_DISTANCE` or more micro-ops later.

ALU micro-ops are not checked: the ALU loop runs at II = 2 (vta.md §2.2), so consecutive
micro-ops are already two cycles apart.
"""

from __future__ import annotations

import numpy as np

from heronlike.errors import VTAHazardError, VTAProgramError

from .config import VTAConfig
from .isa import AluInsn, GemmInsn

#: smallest legal distance, in expanded GEMM micro-ops, between two writes of one accumulator
#: address (VerifyDep: not equal to either of the 2 previous → distance ≥ 3; vta.md §2.5).
#: Architectural, not a timing constant.
ACC_WAW_MIN_DISTANCE = 3


def expand(insn: GemmInsn | AluInsn, uops: np.ndarray) -> tuple[np.ndarray, ...]:
    """Expanded (dst, src, wgt) indices of every micro-op ``insn`` executes, in execution order.

    Args:
        insn: the GEMM or ALU instruction.
        uops: the micro-op buffer, an ``(depth, 3)`` int64 array of (dst, src, wgt).

    Returns:
        three int64 arrays of length ``insn.n_uops`` (wgt is all zeros for ALU).
    """
    base = uops[insn.uop_bgn : insn.uop_end]
    o = np.arange(insn.iter_out, dtype=np.int64)[:, None, None]
    i = np.arange(insn.iter_in, dtype=np.int64)[None, :, None]
    dst = base[None, None, :, 0] + o * insn.dst_factor_out + i * insn.dst_factor_in
    src = base[None, None, :, 1] + o * insn.src_factor_out + i * insn.src_factor_in
    if isinstance(insn, GemmInsn):
        wgt = base[None, None, :, 2] + o * insn.wgt_factor_out + i * insn.wgt_factor_in
    else:
        wgt = np.zeros_like(dst)
    return dst.ravel(), src.ravel(), wgt.ravel()


def check_bounds(
    insn: GemmInsn | AluInsn, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray, config: VTAConfig
) -> None:
    """Every expanded index lies inside its buffer (ACC for dst; INP or ACC for src; WGT).

    Raises:
        VTAProgramError: naming the buffer, the offending index and the depth.
    """
    if not dst.size:
        return
    src_kind = "INP" if isinstance(insn, GemmInsn) else "ACC"
    checks = [("ACC", "dst", dst)]
    if isinstance(insn, GemmInsn) and not insn.reset:
        checks += [(src_kind, "src", src), ("WGT", "wgt", wgt)]
    elif isinstance(insn, AluInsn) and not insn.use_imm and not insn.reset:
        checks.append((src_kind, "src", src))
    for kind, name, idx in checks:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= config.depth(kind):
            bad = lo if lo < 0 else hi
            raise VTAProgramError(
                f"{type(insn).__name__}: expanded {name} index {bad} outside {kind} "
                f"(depth {config.depth(kind)})"
            )


def check_acc_hazard(dst: np.ndarray, min_distance: int = ACC_WAW_MIN_DISTANCE) -> None:
    """Raise :class:`VTAHazardError` if an accumulator address repeats within fewer than
    ``min_distance`` expanded micro-ops.

    Args:
        dst: expanded destination indices of one GEMM, in execution order.
    """
    for d in range(1, min_distance):
        if dst.size <= d:
            break
        hits = np.flatnonzero(dst[d:] == dst[:-d])
        if hits.size:
            k = int(hits[0])
            raise VTAHazardError(
                f"GEMM accumulator hazard: micro-ops {k} and {k + d} of the expanded stream both "
                f"write acc[{int(dst[k])}] ({d} apart; at least {min_distance} needed: "
                "put ≥ 3 distinct destinations in the innermost loop, vta.md §2.5)"
            )
