"""Instructions as columns: :class:`InsnTable`, one numpy array per instruction field.

A program of 10⁵–10⁶ instructions (a BMM of 12 × 512 × 512 × 64 with small tiles) is cheap to
generate, check, store, load and time only as arrays: one Python object per instruction costs
microseconds each to create, pickle and unpickle. :class:`InsnTable` holds every field of every
instruction in one column per field (:data:`FIELDS`, the union of the fields of
:class:`~.isa.MemInsn`, :class:`~.isa.GemmInsn`, :class:`~.isa.AluInsn` and
:class:`~.isa.FinishInsn`, plus ``opcode``); a field an instruction does not have is 0 in its
row. It converts to and from instruction objects exactly (``InsnTable.from_instructions(insns)
.instructions() == tuple(insns)``), and to and from the 128-bit encodings of :mod:`.encoding`
in one vectorised pass (:func:`encode_table`, :func:`decode_table`: what a build artifact
stores, :mod:`.lowering`).

Column dtypes: int64 while a program is assembled and checked (a value may not fit its field
yet); after :meth:`~.program.Program.validate`, each column is narrowed to the smallest dtype
that holds its encoding width under the program's config (:func:`field_dtypes`: uint8 for flags
and pads, uint16 for sizes and indices, uint32 for ``dram_base``, int16 for ``imm``), about
45 bytes per instruction. Arithmetic on columns must go through :meth:`InsnTable.i64`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

import numpy as np

from heronlike.errors import VTAProgramError

from .config import VTAConfig
from .isa import AluInsn, AluOp, FinishInsn, GemmInsn, Instruction, MemId, MemInsn, Opcode

#: every instruction field, in column order (``opcode`` first, then the header flags)
FIELDS: tuple[str, ...] = (
    "opcode",
    "pop_prev",
    "pop_next",
    "push_prev",
    "push_next",
    "memory_type",
    "sram_base",
    "dram_base",
    "y_size",
    "x_size",
    "x_stride",
    "y_pad_0",
    "y_pad_1",
    "x_pad_0",
    "x_pad_1",
    "reset",
    "uop_bgn",
    "uop_end",
    "iter_out",
    "iter_in",
    "dst_factor_out",
    "dst_factor_in",
    "src_factor_out",
    "src_factor_in",
    "wgt_factor_out",
    "wgt_factor_in",
    "alu_opcode",
    "use_imm",
    "imm",
)
#: field name → column index (the position in a builder row, :func:`row_of`)
IDX: dict[str, int] = {f: i for i, f in enumerate(FIELDS)}
NF = len(FIELDS)
FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")

#: the fields of each instruction class, as its dataclass declares them (opcode excluded)
_CLASS_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f for f in cls.__dataclass_fields__ if f != "opcode")
    for cls in (MemInsn, GemmInsn, AluInsn, FinishInsn)
}
_OPCODE_CLASS = {
    Opcode.LOAD: MemInsn,
    Opcode.STORE: MemInsn,
    Opcode.GEMM: GemmInsn,
    Opcode.ALU: AluInsn,
    Opcode.FINISH: FinishInsn,
}
_BOOL_FIELDS = frozenset((*FLAGS, "reset", "use_imm"))


def row_of(insn: Instruction) -> list[int]:
    """One instruction as a builder row: a list of :data:`NF` ints in :data:`FIELDS` order."""
    row = [0] * NF
    cls = type(insn)
    if cls is MemInsn:
        row[0] = int(insn.opcode)
    else:
        row[0] = int(Opcode.GEMM if cls is GemmInsn else Opcode.ALU if cls is AluInsn else 3)
    for name in _CLASS_FIELDS[cls]:
        row[IDX[name]] = int(getattr(insn, name))
    return row


def insn_of_row(row: Sequence[int]) -> Instruction:
    """The instruction object of a row (:func:`row_of`'s inverse); values must be ints.

    Raises:
        VTAProgramError: an unknown opcode, memory type or ALU opcode.
    """
    try:
        opcode = Opcode(int(row[0]))
        cls = _OPCODE_CLASS[opcode]
        kw: dict[str, object] = {}
        for name in _CLASS_FIELDS[cls]:
            v = int(row[IDX[name]])
            if name in _BOOL_FIELDS:
                kw[name] = bool(v)
            elif name == "memory_type":
                kw[name] = MemId(v)
            elif name == "alu_opcode":
                kw[name] = AluOp(v)
            else:
                kw[name] = v
    except ValueError as exc:
        raise VTAProgramError(f"not a VTA instruction row: {exc}") from None
    if cls is MemInsn:
        return MemInsn(opcode=opcode, **kw)  # type: ignore[arg-type]
    return cls(**kw)  # type: ignore[no-any-return]


@lru_cache(maxsize=8)
def field_widths(config: VTAConfig) -> dict[str, tuple[int, bool]]:
    """(widest encoding in bits over every opcode, signed) of each field under ``config``."""
    from .encoding import layout

    out: dict[str, tuple[int, bool]] = {f: (1, False) for f in FIELDS}
    for opcode in Opcode:
        for name, width, signed in layout(opcode, config):
            out[name] = (max(out[name][0], width), signed or out[name][1])
    return out


@lru_cache(maxsize=8)
def field_dtypes(config: VTAConfig) -> dict[str, np.dtype]:
    """The narrow storage dtype of each field of a validated table (see the module docstring)."""
    out = {}
    for name, (width, signed) in field_widths(config).items():
        for bits in (8, 16, 32, 64):
            if width <= bits:
                out[name] = np.dtype(f"{'i' if signed else 'u'}{bits // 8}")
                break
    return out


class InsnTable:
    """Every instruction of a program as columns (see the module docstring).

    Args:
        cols: one 1-D array per name of :data:`FIELDS`, all of one length.

    Raises:
        VTAProgramError: a missing field or columns of different lengths.
    """

    __slots__ = ("cols", "n")

    def __init__(self, cols: Mapping[str, np.ndarray]) -> None:
        missing = [f for f in FIELDS if f not in cols]
        if missing:
            raise VTAProgramError(f"an instruction table needs the columns {missing}")
        self.cols: dict[str, np.ndarray] = {f: np.asarray(cols[f]) for f in FIELDS}
        lengths = {len(c) for c in self.cols.values()}
        if len(lengths) != 1 or any(c.ndim != 1 for c in self.cols.values()):
            raise VTAProgramError(f"instruction columns of different lengths {sorted(lengths)}")
        self.n = lengths.pop()

    def __len__(self) -> int:
        return self.n

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[int]]) -> InsnTable:
        """A table of builder rows (int64 columns)."""
        if not rows:
            return cls.empty()
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), NF)
        return cls({f: np.ascontiguousarray(arr[:, i]) for i, f in enumerate(FIELDS)})

    @classmethod
    def from_instructions(cls, insns: Iterable[Instruction]) -> InsnTable:
        """A table of instruction objects (int64 columns)."""
        return cls.from_rows([row_of(i) for i in insns])

    @classmethod
    def empty(cls) -> InsnTable:
        return cls({f: np.zeros(0, np.int64) for f in FIELDS})

    def i64(self, name: str, idx: np.ndarray | slice | None = None) -> np.ndarray:
        """Column ``name`` (rows ``idx``) as int64, for arithmetic (no copy if already int64)."""
        col = self.cols[name] if idx is None else self.cols[name][idx]
        return col.astype(np.int64, copy=False)

    def row(self, pc: int) -> list[int]:
        """Instruction ``pc`` as a builder row of Python ints."""
        return [int(self.cols[f][pc]) for f in FIELDS]

    def instruction(self, pc: int) -> Instruction:
        """Instruction ``pc`` as an object."""
        return insn_of_row(self.row(pc))

    def instructions(self) -> tuple[Instruction, ...]:
        """Every instruction as an object, in order (one Python object each: for the reference
        simulator and for inspection, not for tuning's hot path)."""
        lists = [self.cols[f].tolist() for f in FIELDS]
        return tuple(insn_of_row(r) for r in zip(*lists, strict=True))

    def engines(self) -> np.ndarray:
        """The engine of every instruction (int8; :func:`~.isa.engine_of`): 2 for STORE, 0 for a
        LOAD of INP or WGT, 1 otherwise."""
        op, mt = self.cols["opcode"], self.cols["memory_type"]
        eng = np.ones(self.n, np.int8)
        eng[(op == Opcode.LOAD) & ((mt == MemId.INP) | (mt == MemId.WGT))] = 0
        eng[op == Opcode.STORE] = 2
        return eng

    def narrowed(self, config: VTAConfig) -> InsnTable:
        """The same table with every column in its narrow dtype (:func:`field_dtypes`); only
        for a table whose every field fits its encoding width (validated)."""
        dt = field_dtypes(config)
        return InsnTable({f: self.cols[f].astype(dt[f], copy=False) for f in FIELDS})

    def equals(self, other: InsnTable) -> bool:
        """Same instructions (values compared, dtypes ignored)."""
        return self.n == other.n and all(np.array_equal(self.i64(f), other.i64(f)) for f in FIELDS)


# -- 128-bit encodings, vectorised ------------------------------------------------------------
def _put(lo: np.ndarray, hi: np.ndarray, v: np.ndarray, shift: int, width: int) -> None:
    """OR the ``width``-bit values ``v`` (uint64) into the 128-bit words (lo, hi) at ``shift``."""
    if shift >= 64:
        hi |= v << np.uint64(shift - 64)
    elif shift + width <= 64:
        lo |= v << np.uint64(shift)
    else:  # straddles the two halves
        lo |= v << np.uint64(shift)
        hi |= v >> np.uint64(64 - shift)


def _get(lo: np.ndarray, hi: np.ndarray, shift: int, width: int) -> np.ndarray:
    """The ``width``-bit field at ``shift`` of the words (lo, hi), as uint64."""
    mask = np.uint64((1 << width) - 1)
    if shift >= 64:
        return (hi >> np.uint64(shift - 64)) & mask
    if shift + width <= 64:
        return (lo >> np.uint64(shift)) & mask
    return ((lo >> np.uint64(shift)) | (hi << np.uint64(64 - shift))) & mask


def encode_table(table: InsnTable, config: VTAConfig, *, checked: bool = False) -> np.ndarray:
    """Every instruction's 128-bit encoding (:func:`~.encoding.encode`) as an ``(n, 2)`` uint64
    array of (low 64 bits, high 64 bits).

    Each field is placed for all instructions at once, per distinct bit position among the
    opcodes that have it (a field an instruction does not have is 0 in its row).

    Args:
        table: the instructions.
        config: their hardware (field widths).
        checked: every field is known to fit its width (a validated program's table): skip
            the range checks.

    Raises:
        VTAFieldError: a field does not fit its width (the first such instruction's error, as
            :func:`~.encoding.encode` raises it).
    """
    from .encoding import encode, layout

    op = table.cols["opcode"]
    present = [o for o in Opcode if (op == o).any()]
    if not checked:
        bad = np.zeros(table.n, bool)
        for opcode in present:
            idx = np.flatnonzero(op == opcode)
            for name, width, signed in layout(opcode, config):
                v = table.i64(name, idx)
                lim_lo = -(1 << (width - 1)) if signed else 0
                lim_hi = (1 << (width - 1)) - 1 if signed else (1 << width) - 1
                bad[idx] |= (v < lim_lo) | (v > lim_hi)
        first = np.flatnonzero(bad)
        if first.size:
            encode(table.instruction(int(first[0])), config)  # raises that instruction's error
    where: dict[str, dict[tuple[int, int], list[Opcode]]] = {f: {} for f in FIELDS}
    for o in present:
        shift = 0
        for name, width, _ in layout(o, config):
            where[name].setdefault((shift, width), []).append(o)
            shift += width
    lo = np.zeros(table.n, np.uint64)
    hi = np.zeros(table.n, np.uint64)
    for name in FIELDS:
        placements = where[name]
        col = table.cols[name]
        for (shift, width), opcodes in placements.items():
            if col.dtype.kind == "u":
                v = col.astype(np.uint64)
            else:
                v = (col.astype(np.int64) & ((1 << width) - 1)).astype(np.uint64)
            if len(placements) > 1:  # only the rows of these opcodes
                v[~np.isin(op, [int(o) for o in opcodes])] = 0
            _put(lo, hi, v, shift, width)
    return np.stack([lo, hi], axis=1)


def decode_table(words: np.ndarray, config: VTAConfig) -> InsnTable:
    """The instructions of ``(n, 2)`` uint64 words (:func:`encode_table`'s inverse), as a table
    in narrow dtypes (:func:`field_dtypes`).

    Each field is extracted from every word at once, for all the opcodes that place it at the
    same bits, and zeroed where the opcode has no such field: no per-opcode gathers.

    Raises:
        VTAProgramError: an unknown opcode, memory type or ALU opcode, or bits set beyond an
            instruction's last field (the first such word's error, as
            :func:`~.encoding.decode` raises it).
    """
    from .encoding import decode, layout

    words = np.asarray(words)
    if words.ndim != 2 or words.shape[1] != 2 or words.dtype != np.uint64:
        raise VTAProgramError(f"instruction words must be (n, 2) uint64, not {words.shape}")
    n = len(words)
    lo, hi = np.ascontiguousarray(words[:, 0]), np.ascontiguousarray(words[:, 1])
    op8 = (lo & np.uint64(7)).astype(np.uint8)
    dtypes = field_dtypes(config)
    present = [o for o in Opcode if (op8 == o).any()]
    has = {o: op8 == o for o in present}
    bad = ~np.isin(op8, [int(o) for o in Opcode])
    # field -> {(shift, width, signed): [opcodes]}
    where: dict[str, dict[tuple[int, int, bool], list[Opcode]]] = {f: {} for f in FIELDS}
    for o in present:
        shift = 0
        for name, width, signed in layout(o, config):
            where[name].setdefault((shift, width, signed), []).append(o)
            shift += width
        if shift < 64:
            above = ((lo >> np.uint64(shift)) != 0) | (hi != 0)
        elif shift < 128:
            above = (hi >> np.uint64(shift - 64)) != 0
        else:
            above = np.zeros(n, bool)
        bad |= has[o] & above
    cols: dict[str, np.ndarray] = {}
    for name in FIELDS:
        dt = dtypes[name]
        col: np.ndarray | None = None
        for (shift, width, signed), opcodes in where[name].items():
            v = _get(lo, hi, shift, width)
            if signed:
                v = (v.astype(np.int64) ^ (1 << (width - 1))) - (1 << (width - 1))
            v = v.astype(dt)
            mask = has[opcodes[0]].copy()
            for o in opcodes[1:]:
                mask |= has[o]
            if col is None and mask.all():
                col = v
            else:
                col = np.where(mask, v, col if col is not None else np.zeros((), dt)).astype(dt)
        cols[name] = col if col is not None else np.zeros(n, dt)
    mt = cols["memory_type"]
    is_mem = (op8 == Opcode.LOAD) | (op8 == Opcode.STORE)
    bad |= is_mem & ~np.isin(mt, [int(m) for m in MemId])
    bad |= (op8 == Opcode.ALU) & ~np.isin(cols["alu_opcode"], [int(a) for a in AluOp])
    first = np.flatnonzero(bad)
    if first.size:
        pc = int(first[0])
        word = int(lo[pc]) | (int(hi[pc]) << 64)
        try:
            decode(word, config)
        except VTAProgramError as exc:
            raise VTAProgramError(f"instruction word {pc}: {exc}") from None
        raise VTAProgramError(f"instruction word {pc} does not decode")  # pragma: no cover
    return InsnTable(cols)
