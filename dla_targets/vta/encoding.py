"""Field widths, range checks and the 128-bit instruction / 32-bit micro-op encodings.

Widths are those of vta.md §2.3 for the given :class:`~.config.VTAConfig` (defaults in
brackets): header opcode[3] + pop_prev, pop_next, push_prev, push_next [1 each]; LOAD/STORE
memory_type[3], sram_base[16], dram_base[32], y_size[16], x_size[16], x_stride[16], four
pads[4]; GEMM reset[1], uop_bgn[log2 UOP depth = 13], uop_end[14], iter_out[14], iter_in[14],
dst factors[log2 ACC depth = 11], src factors[log2 INP depth = 11], wgt factors[log2 WGT
depth = 10]; ALU as GEMM with ACC-indexed src factors, alu_opcode[3], use_imm[1], imm[16,
signed]; micro-op dst[11], src[11], wgt[10].

Fields are packed least-significant bit first, contiguously, in the order listed. That is a
faithful, round-trippable 128-bit form of every field; it is not claimed bit-identical to
``hw_spec.h``'s C bit-field layout (no hardware consumes it here).
"""

from __future__ import annotations

from functools import lru_cache

from heronlike.errors import VTAFieldError, VTAProgramError

from .config import (
    ALU_IMM_BITS,
    INSN_BITS,
    LOOP_ITER_BITS,
    MEM_DRAM_BITS,
    MEM_PAD_BITS,
    MEM_SIZE_BITS,
    MEM_SRAM_BITS,
    MEM_STRIDE_BITS,
    VTAConfig,
)
from .isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Opcode,
    Uop,
    opcode_of,
)

#: a layout: (field name, width in bits, signed) in packing order
Layout = tuple[tuple[str, int, bool], ...]

_HEADER: Layout = (
    ("opcode", 3, False),
    ("pop_prev", 1, False),
    ("pop_next", 1, False),
    ("push_prev", 1, False),
    ("push_next", 1, False),
)


@lru_cache(maxsize=32)
def layout(opcode: Opcode, config: VTAConfig) -> Layout:
    """The fields of an instruction with ``opcode`` under ``config``, header first."""
    if opcode in (Opcode.LOAD, Opcode.STORE):
        body: Layout = (
            ("memory_type", 3, False),
            ("sram_base", MEM_SRAM_BITS, False),
            ("dram_base", MEM_DRAM_BITS, False),
            ("y_size", MEM_SIZE_BITS, False),
            ("x_size", MEM_SIZE_BITS, False),
            ("x_stride", MEM_STRIDE_BITS, False),
            ("y_pad_0", MEM_PAD_BITS, False),
            ("y_pad_1", MEM_PAD_BITS, False),
            ("x_pad_0", MEM_PAD_BITS, False),
            ("x_pad_1", MEM_PAD_BITS, False),
        )
    elif opcode in (Opcode.GEMM, Opcode.ALU):
        src_bits = config.inp_index_bits if opcode == Opcode.GEMM else config.acc_index_bits
        body = (
            ("reset", 1, False),
            ("uop_bgn", config.uop_index_bits, False),
            ("uop_end", config.uop_index_bits + 1, False),
            ("iter_out", LOOP_ITER_BITS, False),
            ("iter_in", LOOP_ITER_BITS, False),
            ("dst_factor_out", config.acc_index_bits, False),
            ("dst_factor_in", config.acc_index_bits, False),
            ("src_factor_out", src_bits, False),
            ("src_factor_in", src_bits, False),
        )
        if opcode == Opcode.GEMM:
            body += (
                ("wgt_factor_out", config.wgt_index_bits, False),
                ("wgt_factor_in", config.wgt_index_bits, False),
            )
        else:
            body += (
                ("alu_opcode", 3, False),
                ("use_imm", 1, False),
                ("imm", ALU_IMM_BITS, True),
            )
    elif opcode == Opcode.FINISH:
        body = ()
    else:  # pragma: no cover - Opcode is closed
        raise VTAProgramError(f"unknown opcode {opcode!r}")
    return _HEADER + body


@lru_cache(maxsize=8)
def uop_layout(config: VTAConfig) -> Layout:
    """Micro-op fields: dst_idx (ACC), src_idx (INP or ACC), wgt_idx (WGT)."""
    return (
        ("dst_idx", config.acc_index_bits, False),
        ("src_idx", config.uop_src_bits, False),
        ("wgt_idx", config.wgt_index_bits, False),
    )


def _fields(insn: Instruction) -> dict[str, int]:
    values = {"opcode": int(opcode_of(insn))}
    for name in insn.__dataclass_fields__:
        if name != "opcode":
            values[name] = int(getattr(insn, name))
    return values


def check_field(name: str, value: int, width: int, signed: bool, where: str = "") -> None:
    """Raise :class:`VTAFieldError` unless ``value`` fits ``width`` bits.

    Unsigned fields take ``0 <= value < 2**width``; signed ones two's complement
    ``-2**(width-1) <= value < 2**(width-1)``.
    """
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if not lo <= value <= hi:
        kind = "signed" if signed else "unsigned"
        raise VTAFieldError(
            f"{where}field {name} = {value} does not fit its {width}-bit {kind} encoding "
            f"[{lo}, {hi}]",
            field=name,
            width=width,
            value=value,
            signed=signed,
        )


def check_fields(insn: Instruction, config: VTAConfig) -> None:
    """Check every field of ``insn`` against its encoding width under ``config``.

    Raises:
        VTAFieldError: naming the first field that does not fit, its width and value.
    """
    opcode = opcode_of(insn)
    for name, lo, hi in _bounds(opcode, config):
        if not lo <= getattr(insn, name) <= hi:
            break
    else:
        return  # fast path: every field fits
    values = _fields(insn)
    where = f"{type(insn).__name__}: "
    for name, width, signed in layout(opcode, config):
        check_field(name, values[name], width, signed, where)


@lru_cache(maxsize=32)
def _bounds(opcode: Opcode, config: VTAConfig) -> tuple[tuple[str, int, int], ...]:
    """(field, lowest, highest) of every field but the opcode, for the fast check."""
    out = []
    for name, width, signed in layout(opcode, config)[1:]:
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        out.append((name, lo, hi))
    return tuple(out)


def check_uop(uop: Uop, config: VTAConfig) -> None:
    """Check a micro-op's three indices against their widths (vta.md §2.3).

    Raises:
        VTAFieldError: naming the field that does not fit.
    """
    for name, width, signed in uop_layout(config):
        check_field(name, int(getattr(uop, name)), width, signed, "Uop: ")


def _pack(values: dict[str, int], fields: Layout, where: str = "") -> int:
    word, shift = 0, 0
    for name, width, signed in fields:
        check_field(name, values[name], width, signed, where)
        word |= (values[name] & ((1 << width) - 1)) << shift
        shift += width
    return word


def _unpack(word: int, fields: Layout) -> dict[str, int]:
    values, shift = {}, 0
    for name, width, signed in fields:
        v = (word >> shift) & ((1 << width) - 1)
        if signed and v >> (width - 1):
            v -= 1 << width
        values[name] = v
        shift += width
    return values


def encode(insn: Instruction, config: VTAConfig) -> int:
    """The instruction as a 128-bit unsigned integer.

    Raises:
        VTAFieldError: a field does not fit its width.
    """
    return _pack(_fields(insn), layout(opcode_of(insn), config), f"{type(insn).__name__}: ")


def decode(word: int, config: VTAConfig) -> Instruction:
    """The instruction a 128-bit word encodes (inverse of :func:`encode`).

    Raises:
        VTAProgramError: a word outside 128 bits, an unknown opcode, memory type or ALU opcode,
            or bits set beyond the instruction's last field.
    """
    if not 0 <= word < 1 << INSN_BITS:
        raise VTAProgramError(f"an instruction word must be a 128-bit unsigned int, not {word}")
    try:
        opcode = Opcode(word & 0b111)
    except ValueError:
        raise VTAProgramError(f"unknown opcode {word & 0b111}") from None
    fields = layout(opcode, config)
    values = _unpack(word, fields)
    used = sum(width for _, width, _ in fields)
    if word >> used:
        raise VTAProgramError(f"{opcode.name} word has bits set above bit {used - 1}")
    del values["opcode"]
    flags = {k: bool(values.pop(k)) for k in ("pop_prev", "pop_next", "push_prev", "push_next")}
    try:
        if opcode in (Opcode.LOAD, Opcode.STORE):
            values["memory_type"] = MemId(values["memory_type"])
            return MemInsn(opcode=opcode, **flags, **values)
        if opcode == Opcode.FINISH:
            return FinishInsn(**flags)
        values["reset"] = bool(values["reset"])
        if opcode == Opcode.GEMM:
            return GemmInsn(**flags, **values)
        values["alu_opcode"] = AluOp(values["alu_opcode"])
        values["use_imm"] = bool(values["use_imm"])
        return AluInsn(**flags, **values)
    except ValueError as exc:
        raise VTAProgramError(f"cannot decode {opcode.name} word: {exc}") from None


def encode_uop(uop: Uop, config: VTAConfig) -> int:
    """The micro-op as a 32-bit unsigned integer (dst in the low bits).

    Raises:
        VTAFieldError: an index does not fit its width.
    """
    return _pack(
        {"dst_idx": uop.dst_idx, "src_idx": uop.src_idx, "wgt_idx": uop.wgt_idx},
        uop_layout(config),
        "Uop: ",
    )


def decode_uop(word: int, config: VTAConfig) -> Uop:
    """The micro-op a 32-bit word encodes (inverse of :func:`encode_uop`)."""
    return Uop(**_unpack(int(word), uop_layout(config)))
