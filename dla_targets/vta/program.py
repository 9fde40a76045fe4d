"""A VTA program: instructions, the DRAM buffers they address, the micro-op table; static checks.

The instructions are held as columns (:class:`~.table.InsnTable`), and the static checks
(:func:`validate_program`) run on the columns: a vectorised pass marks every instruction a
check may reject, and the per-instruction checks then run on those alone, in order, so the
error raised is the one a loop over every instruction raises.

DRAM is one flat byte space (as on the board). Each :class:`DramBuffer` sits at a byte address
aligned to its element size, so a LOAD/STORE's ``dram_base`` (counted in elements of the
instruction's memory type, vta.md §2.3) is ``buffer.elem_base + element offset``. Micro-ops
live in DRAM too, in the program's micro-op table (:attr:`Program.uops`); a LOAD UOP must read
from inside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from heronlike.errors import VTAProgramError, VTATokenError

from .config import VTAConfig
from .encoding import _bounds, check_field, check_fields, encode_uop, uop_layout
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
from .table import InsnTable, encode_table

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

    def elems(self, *index: int | np.ndarray) -> np.ndarray:
        """:meth:`elem` of many indices at once: each of ``index`` an int or an int array (all
        arrays of one length); returns an int64 array.

        Raises:
            VTAProgramError: as :meth:`elem`, for the first index outside the buffer.
        """
        lead = self.shape[: len(self.shape) - (0 if self.kind == "UOP" else 2)]
        if len(index) > len(lead):
            raise VTAProgramError(f"{self.name}: index {index} has more dims than {lead}")
        arrays = [np.asarray(i, dtype=np.int64) for i in index]
        size = max((a.size for a in arrays if a.ndim), default=1)
        arrays = [np.broadcast_to(a, (size,)) for a in arrays]
        arrays += [np.zeros(size, np.int64)] * (len(lead) - len(arrays))
        bad = np.zeros(size, bool)
        for a, n in zip(arrays, lead, strict=True):
            bad |= (a < 0) | (a >= n)
        first = np.flatnonzero(bad)
        if first.size:
            self.elem(*(int(a[first[0]]) for a in arrays))  # raises its error
        flat = np.zeros(size, np.int64)
        for a, n in zip(arrays, lead, strict=True):
            flat = flat * n + a
        return self.elem_base + flat


class Program:
    """A complete VTA program (build one with :class:`~.builder.ProgramBuilder`).

    The instructions are held as columns (:attr:`table`, an :class:`~.table.InsnTable`): a
    program of 10⁶ instructions is generated, checked, stored and timed as arrays.
    :attr:`instructions` gives them as objects on demand (made once, then cached).

    Args:
        config: the hardware it is for.
        instructions: in fetch order, FINISH last (or give ``table`` instead).
        buffers: DRAM buffers by name (the micro-op table is ``UOP_BUFFER``).
        uops: the micro-op table, an ``(n, 3)`` int64 array of (dst_idx, src_idx, wgt_idx).
        dram_bytes: size of the DRAM image in bytes.
        table: the instructions as columns (exclusive with ``instructions``).

    Raises:
        VTAProgramError: both or neither of ``instructions`` and ``table``.
    """

    __slots__ = ("_insns", "_table", "_validated", "buffers", "config", "dram_bytes", "uops")

    def __init__(
        self,
        config: VTAConfig,
        instructions: Sequence[Instruction] | None = None,
        buffers: Mapping[str, DramBuffer] | None = None,
        uops: np.ndarray | None = None,
        dram_bytes: int = 0,
        *,
        table: InsnTable | None = None,
    ) -> None:
        if (instructions is None) == (table is None):
            raise VTAProgramError("a Program takes either instructions or a table")
        self.config = config
        self.buffers: Mapping[str, DramBuffer] = dict(buffers or {})
        self.uops = np.zeros((0, 3), np.int64) if uops is None else np.asarray(uops)
        self.dram_bytes = int(dram_bytes)
        self._insns: tuple[Instruction, ...] | None = (
            None if instructions is None else tuple(instructions)
        )
        self._table = table
        self._validated = False

    @property
    def table(self) -> InsnTable:
        """The instructions as columns (int64 until validated, then narrow dtypes)."""
        if self._table is None:
            assert self._insns is not None
            self._table = InsnTable.from_instructions(self._insns)
        return self._table

    @property
    def instructions(self) -> tuple[Instruction, ...]:
        """The instructions as objects, in fetch order, FINISH last (made from :attr:`table`
        on first use: about 2 µs per instruction)."""
        if self._insns is None:
            assert self._table is not None
            self._insns = self._table.instructions()
        return self._insns

    @property
    def n_instructions(self) -> int:
        """Instructions in the program (without making them objects)."""
        return len(self._insns) if self._insns is not None else self.table.n

    @property
    def validated(self) -> bool:
        """Whether :meth:`validate` has passed."""
        return self._validated

    def __getstate__(self) -> dict[str, object]:
        return {
            "config": self.config,
            "table": self.table.cols,
            "buffers": dict(self.buffers),
            "uops": self.uops,
            "dram_bytes": self.dram_bytes,
            "_validated": self._validated,
        }

    def __setstate__(self, state: dict[str, object]) -> None:
        # also reads the state of the dataclass this class replaced (instruction objects)
        self.config = state["config"]  # type: ignore[assignment]
        self.buffers = dict(state["buffers"])  # type: ignore[call-overload]
        self.uops = np.asarray(state["uops"])
        self.dram_bytes = int(state["dram_bytes"])  # type: ignore[call-overload]
        if "table" in state:
            self._insns, self._table = None, InsnTable(state["table"])  # type: ignore[arg-type]
        else:
            self._insns, self._table = tuple(state["instructions"]), None  # type: ignore[arg-type]
        self._validated = bool(state.get("_validated", False))

    def encoded(self) -> list[int]:
        """The instruction stream as 128-bit integers (:func:`~.encoding.encode`)."""
        words = self.encoded_words()
        return [int(lo) | (int(hi) << 64) for lo, hi in words.tolist()]

    def encoded_words(self) -> np.ndarray:
        """The instruction stream as an ``(n, 2)`` uint64 array of (low, high) 64-bit halves
        of each 128-bit encoding (:func:`~.table.encode_table`)."""
        return encode_table(self.table, self.config, checked=self._validated)

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

    def mark_validated(self) -> None:
        """Record that the program passed :meth:`validate` elsewhere (a loaded artifact its
        builder validated): narrows the table and skips the checks."""
        self._table = self.table.narrowed(self.config)
        self._validated = True

    def validate(self) -> None:
        """Static checks (:func:`validate_program`); done once per program. Narrows the
        table's columns (:meth:`~.table.InsnTable.narrowed`) once they pass."""
        if not self._validated:
            validate_program(self)
            self._table = self.table.narrowed(self.config)
            self._validated = True


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
    table = program.table
    if program.uops.size:
        for col, (name, width, signed) in enumerate(uop_layout(cfg)):
            values = program.uops[:, col]
            for v in (int(values.min()), int(values.max())):
                check_field(name, v, width, signed, "Uop: ")
    n = table.n
    if not n or int(table.cols["opcode"][-1]) != Opcode.FINISH:
        raise VTAProgramError("a VTA program must end with FINISH")
    # the checks below run one instruction at a time, only where a vectorised pass over the
    # columns says one may fail: the first that does raises what a full loop would raise
    for pc in np.flatnonzero(_suspects(program, table)).tolist():
        _check_one(program, pc, table.instruction(pc))


def _check_one(program: Program, pc: int, insn: Instruction) -> None:
    """Every static check of instruction ``pc`` (see :func:`validate_program`), in order."""
    cfg = program.config
    n = program.n_instructions
    where = f"instruction {pc} ({type(insn).__name__}): "
    check_fields(insn, cfg)
    if isinstance(insn, FinishInsn) and pc != n - 1:
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


def _suspects(program: Program, table: InsnTable) -> np.ndarray:
    """A boolean mask over the instructions, True wherever a check of :func:`_check_one` may
    fail (a superset: every failing instruction is marked), computed on the columns in chunks
    of :data:`_CHUNK` instructions (slices, no copies of whole columns)."""
    n = table.n
    bad = np.zeros(n, bool)
    for lo in range(0, n, _CHUNK):
        sl = slice(lo, min(n, lo + _CHUNK))
        bad[sl] = _chunk_suspects(program, {f: c[sl] for f, c in table.cols.items()})
    bad[:-1] |= table.cols["opcode"][:-1] == Opcode.FINISH
    return bad


#: instructions per chunk of the vectorised checks
_CHUNK = 1 << 16


def _chunk_suspects(program: Program, cols: dict[str, np.ndarray]) -> np.ndarray:
    """:func:`_suspects` for a chunk of columns (FINISH's position aside)."""
    cfg = program.config
    op, mt = cols["opcode"], cols["memory_type"]
    bad = (op < 0) | (op > max(Opcode))
    for name, lo, hi in _field_limits(cfg):  # field widths (check_fields)
        col = cols[name]
        info = np.iinfo(col.dtype)
        if lo <= info.min and info.max <= hi:
            continue  # a narrow dtype that holds nothing wider than the field
        bad |= col > hi
        if lo > info.min:
            bad |= col < lo
    # token flags the engine has no queue for (token_io)
    is_load, is_store = op == Opcode.LOAD, op == Opcode.STORE
    on_load = is_load & ((mt == MemId.INP) | (mt == MemId.WGT))
    bad |= on_load & ((cols["pop_prev"] != 0) | (cols["push_prev"] != 0))
    bad |= is_store & ((cols["pop_next"] != 0) | (cols["push_next"] != 0))
    # LOAD/STORE (_check_mem)
    is_mem = is_load | is_store
    known = (mt >= 0) & (mt <= max(MemId))
    bad |= is_mem & ~known
    bad |= is_load & (mt == MemId.OUT)
    bad |= is_store & (mt != MemId.OUT)
    y, x, stride = cols["y_size"], cols["x_size"], cols["x_stride"]
    y0, y1, x0, x1 = cols["y_pad_0"], cols["y_pad_1"], cols["x_pad_0"], cols["x_pad_1"]
    padded = (y0 != 0) | (y1 != 0) | (x0 != 0) | (x1 != 0)
    bad |= padded & (is_store | (is_load & (mt == MemId.UOP)))
    live = is_mem & known & (y != 0) & (x != 0)
    bad |= live & is_store & (y > 1) & (stride < x)
    depth = np.zeros(len(MemId), np.int64)
    elem = np.zeros(len(MemId), np.int64)
    for m in MemId:
        depth[m] = cfg.depth(SRAM_OF[m])
        elem[m] = cfg.elem_bytes("OUT" if m == MemId.OUT else m.name)
    mt_ok = np.where(known, mt, 0)
    rows = np.add(y0, y, dtype=np.int64)
    rows += y1
    width = np.add(x0, x, dtype=np.int64)
    width += x1
    rows *= width
    rows += cols["sram_base"]
    bad |= live & (rows > depth[mt_ok])
    last = np.subtract(y, 1, dtype=np.int64)
    last *= stride
    last += x
    last += cols["dram_base"]
    last *= np.where(is_store, cfg.elem_bytes("OUT"), elem[mt_ok])
    bad |= live & (last > program.dram_bytes)
    uop = live & (mt == MemId.UOP)
    if uop.any():
        ubuf = program.buffers.get(UOP_BUFFER)
        base = ubuf.elem_base if ubuf is not None else 0
        start = cols["dram_base"].astype(np.int64) - base
        outside = (y != 1) | (start < 0) | (start + x > len(program.uops)) | (ubuf is None)
        bad |= uop & outside
    # GEMM/ALU micro-op ranges and SHR immediates
    loop = (op == Opcode.GEMM) | (op == Opcode.ALU)
    bgn, end = cols["uop_bgn"], cols["uop_end"]
    bad |= loop & ((bgn > end) | (end > cfg.depth("UOP")))
    bits = cfg.acc_dtype.itemsize * 8
    imm = cols["imm"]
    shr = (op == Opcode.ALU) & (cols["use_imm"] != 0) & (cols["alu_opcode"] == AluOp.SHR)
    bad |= shr & ((imm <= -bits) | (imm >= bits))
    return bad


@lru_cache(maxsize=8)
def _field_limits(config: VTAConfig) -> tuple[tuple[str, int, int], ...]:
    """(field, lowest, highest) that every opcode having the field accepts (the narrowest
    range over opcodes: a superset test, exact where the widths agree; a field an instruction
    does not have is 0 in its row)."""
    lims: dict[str, tuple[int, int]] = {}
    for opcode in Opcode:
        for name, lo, hi in _bounds(opcode, config):
            old = lims.get(name, (lo, hi))
            lims[name] = (max(old[0], lo), min(old[1], hi))
    return tuple((name, lo, hi) for name, (lo, hi) in lims.items())


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
