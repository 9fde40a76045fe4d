"""Hypothesis strategies for VTA instructions, shared by the VTA test modules (imported with the
tests folder on ``sys.path``: pytest runs with ``--import-mode=importlib``)."""

from __future__ import annotations

from hypothesis import strategies as st

from heronlike.dla_targets.vta import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    MemId,
    MemInsn,
    Opcode,
)


def unsigned(bits: int) -> st.SearchStrategy[int]:
    """Any value of an unsigned field ``bits`` wide."""
    return st.integers(0, (1 << bits) - 1)


#: the four dependency-token flags every instruction carries
FLAGS = {k: st.booleans() for k in ("pop_prev", "pop_next", "push_prev", "push_next")}
#: the two-level affine loop fields of GEMM and ALU instructions, at their encoding widths
LOOP = {
    "reset": st.booleans(),
    "uop_bgn": unsigned(13),
    "uop_end": unsigned(14),
    "iter_out": unsigned(14),
    "iter_in": unsigned(14),
    "dst_factor_out": unsigned(11),
    "dst_factor_in": unsigned(11),
    "src_factor_out": unsigned(11),
    "src_factor_in": unsigned(11),
}
#: any instruction whose fields fit their encoding widths (not necessarily a valid program)
INSTRUCTIONS = st.one_of(
    st.builds(
        MemInsn,
        opcode=st.sampled_from([Opcode.LOAD, Opcode.STORE]),
        memory_type=st.sampled_from(list(MemId)),
        sram_base=unsigned(16),
        dram_base=unsigned(32),
        y_size=unsigned(16),
        x_size=unsigned(16),
        x_stride=unsigned(16),
        y_pad_0=unsigned(4),
        y_pad_1=unsigned(4),
        x_pad_0=unsigned(4),
        x_pad_1=unsigned(4),
        **FLAGS,
    ),
    st.builds(GemmInsn, wgt_factor_out=unsigned(10), wgt_factor_in=unsigned(10), **LOOP, **FLAGS),
    st.builds(
        AluInsn,
        alu_opcode=st.sampled_from(list(AluOp)),
        use_imm=st.booleans(),
        imm=st.integers(-(1 << 15), (1 << 15) - 1),
        **LOOP,
        **FLAGS,
    ),
    st.builds(FinishInsn, **FLAGS),
)
