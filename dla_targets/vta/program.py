"""A VTA program: instructions, the DRAM buffers they address, the micro-op table; static checks.

DRAM is one flat byte space (as on the board). Each :class:`DramBuffer` sits at a byte address
aligned to its element size, so a LOAD/STORE's ``dram_base`` (counted in elements of the
instruction's memory type, vta.md §2.3) is ``buffer.elem_base + element offset``. Micro-ops
live in DRAM too, in the program's micro-op table (:attr:`Program.uops`); a LOAD UOP must read
from inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from heronlike.errors import VTAProgramError, VTATokenError

from .config import VTAConfig
from .encoding import check_field, check_fields, encode, encode_uop, uop_layout
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
    token_io,
)

#: name of the DRAM buffer that holds the micro-op table
UOP_BUFFER = "__uops__"

#: memory types a LOAD may name (OUT is store-only)
LOADABLE = (MemId.UOP, MemId.WGT, MemId.INP, MemId.ACC, MemId.ACC_8BIT)
#: the on-chip buffer a LOAD of each memory type fills (ACC_8BIT fills ACC)
SRAM_OF = {
    MemId.UOP: "UOP",
    MemId.WGT: "WGT",
    MemId.INP: "INP",
    MemId.ACC: "ACC",
    MemId.ACC_8BIT: "ACC",
    MemId.OUT: "ACC",
}


@dataclass(frozen=True)
class DramBuffer:
    """A named DRAM tensor of ``kind`` elements (``"INP"``, ``"WGT"``, ``"ACC"``, ``"ACC_8BIT"``,
    ``"OUT"`` or ``"UOP"``).

    ``shape`` is the full numpy shape: leading dims (any) then the element shape of ``kind``
    (e.g. ``(M, K // 16, 1, 16)`` int8 for INP under the default config). ``addr`` is in bytes.
    """

    name: str
    kind: str
    addr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    elem_bytes: int

    @property
    def n_elems(self) -> int:
        """Elements of ``kind`` (the product of the leading dims)."""
        elem_ndim = 0 if self.kind == "UOP" else 2
        return int(np.prod(self.shape[: len(self.shape) - elem_ndim], dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.n_elems * self.elem_bytes

    @property
    def elem_base(self) -> int:
        """DRAM address of the buffer in elements of its kind (a LOAD/STORE's dram_base)."""
        return self.addr // self.elem_bytes

    def elem(self, *index: int) -> int:
        """Absolute DRAM element address of ``buffer[index]`` (an index over the leading dims,
        row-major, trailing dims may be omitted and count as 0)."""
        lead = self.shape[: len(self.shape) - (0 if self.kind == "UOP" else 2)]
        if len(index) > len(lead):
            raise VTAProgramError(f"{self.name}: index {index} has more dims than {lead}")
        index = tuple(index) + (0,) * (len(lead) - len(index))
        for i, n in zip(index, lead):
            if not 0 <= i < n:
                raise VTAProgramError(f"{self.name}: index {index} outside {lead}")
        return self.elem_base + int(np.ravel_multi_index(index, lead)) if lead else self.elem_base


@dataclass(frozen=True, eq=False)
class Program:
    """A complete VTA program (build one with :class:`~.builder.ProgramBuilder`).

    Attributes:
        config: the hardware it is for.
        instructions: in fetch order, FINISH last.
        buffers: DRAM buffers by name (the micro-op table is ``UOP_BUFFER``).
        uops: the micro-op table, an ``(n, 3)`` int64 array of (dst_idx, src_idx, wgt_idx).
        dram_bytes: size of the DRAM image.
    """

    config: VTAConfig
    instructions: tuple[Instruction, ...]
    buffers: Mapping[str, DramBuffer]
    uops: np.ndarray
    dram_bytes: int
    _validated: bool = field(default=False, init=False, repr=False)

    def encoded(self) -> list[int]:
        """The instruction stream as 128-bit integers (:func:`~.encoding.encode`)."""
        return [encode(insn, self.config) for insn in self.instructions]

    def make_dram(self, inputs: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """A zeroed DRAM image (uint8, ``dram_bytes`` long) with the encoded micro-op table and
        each named input written into its buffer.

        Raises:
            VTAProgramError: an unknown buffer name, a shape that is not the buffer's, or values
                that do not fit the buffer's dtype.
        """
        dram = np.zeros(self.dram_bytes, dtype=np.uint8)
        ubuf = self.buffers[UOP_BUFFER]
        if len(self.uops):
            words = np.array(
                [encode_uop(Uop(*map(int, row)), self.config) for row in self.uops],
                dtype="<u4",
            )
            dram[ubuf.addr : ubuf.addr + words.nbytes] = words.view(np.uint8)
        for name, array in (inputs or {}).items():
            buf = self.buffers.get(name)
            if buf is None or name == UOP_BUFFER:
                raise VTAProgramError(f"no DRAM buffer {name!r}; buffers: {sorted(self.buffers)}")
            array = np.asarray(array)
            if array.shape != buf.shape:
                raise VTAProgramError(f"{name}: shape {array.shape}, buffer holds {buf.shape}")
            cast = array.astype(buf.dtype)
            if not np.array_equal(cast, array):
                raise VTAProgramError(f"{name}: values do not fit {buf.dtype}")
            dram[buf.addr : buf.addr + buf.nbytes] = (
                cast.astype(buf.dtype.newbyteorder("<")).view(np.uint8).ravel()
            )
        return dram

    def read(self, dram: np.ndarray, name: str) -> np.ndarray:
        """A copy of buffer ``name`` from a DRAM image, with the buffer's shape and dtype."""
        buf = self.buffers[name]
        raw = dram[buf.addr : buf.addr + buf.nbytes]
        return raw.view(buf.dtype.newbyteorder("<")).reshape(buf.shape).astype(buf.dtype)

    def validate(self) -> None:
        """Static checks (:func:`validate_program`); done once per program."""
        if not self._validated:
            validate_program(self)
            object.__setattr__(self, "_validated", True)  # a cache, not state: fields are frozen


def validate_program(program: Program) -> None:
    """Every check that needs no execution.

    * each field fits its encoding width (vta.md §2.3) and each micro-op's indices too;
    * exactly one FINISH, the last instruction;
    * token flags exist on the instruction's engine (vta.md §2.3);
    * LOAD names UOP/WGT/INP/ACC/ACC_8BIT and STORE names OUT; stores and UOP loads do not pad;
      UOP loads are one row and read inside the micro-op table;
    * SRAM ranges stay within buffer depths, DRAM ranges within the image;
    * GEMM/ALU micro-op ranges lie within the micro-op buffer; an SHR immediate is a shift
      smaller than the accumulator width.

    Expanded micro-op indices (bounds and the accumulator hazard) are checked when the GEMM/ALU
    runs, since they depend on the micro-op buffer's contents (:mod:`.hazards`).

    Raises:
        VTAFieldError: a field does not fit its width.
        VTATokenError: a token flag with no queue on the instruction's engine.
        VTAProgramError: any other check above.
    """
    cfg = program.config
    insns = program.instructions
    if program.uops.size:
        for col, (name, width, signed) in enumerate(uop_layout(cfg)):
            values = program.uops[:, col]
            for v in (int(values.min()), int(values.max())):
                check_field(name, v, width, signed, "Uop: ")
    if not insns or not isinstance(insns[-1], FinishInsn):
        raise VTAProgramError("a VTA program must end with FINISH")
    for pc, insn in enumerate(insns):
        where = f"instruction {pc} ({type(insn).__name__}): "
        check_fields(insn, cfg)
        if isinstance(insn, FinishInsn) and pc != len(insns) - 1:
            raise VTAProgramError(f"{where}FINISH before the last instruction")
        try:
            token_io(insn)
        except VTATokenError as exc:
            raise VTATokenError(where + str(exc)) from None
        if isinstance(insn, MemInsn):
            _check_mem(program, insn, where)
        elif isinstance(insn, GemmInsn | AluInsn):
            if insn.uop_bgn > insn.uop_end or insn.uop_end > cfg.depth("UOP"):
                raise VTAProgramError(
                    f"{where}micro-op range [{insn.uop_bgn}, {insn.uop_end}) outside the "
                    f"{cfg.depth('UOP')}-entry micro-op buffer"
                )
            if isinstance(insn, AluInsn) and insn.use_imm and insn.alu_opcode == AluOp.SHR:
                bits = cfg.acc_dtype.itemsize * 8
                if not -bits < insn.imm < bits:
                    raise VTAProgramError(f"{where}SHR by {insn.imm}: |shift| must be < {bits}")


def _check_mem(program: Program, insn: MemInsn, where: str) -> None:
    cfg = program.config
    if insn.opcode == Opcode.LOAD and insn.memory_type not in LOADABLE:
        raise VTAProgramError(f"{where}LOAD of {insn.memory_type.name} (OUT is store-only)")
    if insn.opcode == Opcode.STORE and insn.memory_type != MemId.OUT:
        raise VTAProgramError(f"{where}STORE of {insn.memory_type.name}: stores write OUT")
    pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
    if any(pads) and (insn.opcode == Opcode.STORE or insn.memory_type == MemId.UOP):
        raise VTAProgramError(f"{where}{insn.memory_type.name} transfers cannot pad")
    if insn.is_nop:
        return
    if insn.opcode == Opcode.STORE and insn.y_size > 1 and insn.x_stride < insn.x_size:
        raise VTAProgramError(
            f"{where}x_stride {insn.x_stride} < x_size {insn.x_size}: stored rows overlap"
        )
    sram = SRAM_OF[insn.memory_type]
    if insn.sram_base + insn.sram_elems > cfg.depth(sram):
        raise VTAProgramError(
            f"{where}SRAM {sram}[{insn.sram_base}:{insn.sram_base + insn.sram_elems}] exceeds "
            f"its depth {cfg.depth(sram)}"
        )
    kind = "OUT" if insn.opcode == Opcode.STORE else insn.memory_type.name
    elem = cfg.elem_bytes(kind)
    last = insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size
    if last * elem > program.dram_bytes:
        raise VTAProgramError(
            f"{where}DRAM bytes [{insn.dram_base * elem}, {last * elem}) exceed the "
            f"{program.dram_bytes}-byte image"
        )
    if insn.memory_type == MemId.UOP:
        ubuf = program.buffers[UOP_BUFFER]
        if insn.y_size != 1:
            raise VTAProgramError(f"{where}a UOP load is one row (y_size 1), not {insn.y_size}")
        lo = insn.dram_base - ubuf.elem_base
        if lo < 0 or lo + insn.x_size > len(program.uops):
            raise VTAProgramError(f"{where}UOP load reads outside the micro-op table")
