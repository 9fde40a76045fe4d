"""ProgramBuilder: assemble VTA programs in Python, as TVM's VTA JIT runtime did (vta.md §2.8).

In our own terms, the runtime's services are:

* DRAM allocation (:meth:`ProgramBuilder.alloc`), each buffer aligned to its element size;
* micro-op kernels (:meth:`~ProgramBuilder.kernel`) kept in a DRAM micro-op table and loaded
  into the micro-op buffer only when not resident (a bump allocator that wraps around and evicts
  what it overwrites, like the runtime's ring cache);
* 2-D loads and stores, GEMM and ALU over a kernel inside a two-level affine loop;
* dependency tokens: :meth:`~ProgramBuilder.dep_pop` marks the next instruction of the
  consuming engine; :meth:`~ProgramBuilder.dep_push` sets the flag on the previous instruction
  if it belongs to the producing engine and the flag is free, else emits a token-only no-op
  (``runtime.cc`` DepPush/DepPop, vta.md §2.8);
* :meth:`~ProgramBuilder.finish`: wait for the load and store engines, then FINISH
  (``VTASynchronize``).

Instructions are kept as rows (lists of ints in :data:`~.table.FIELDS` order), not objects, and
the program is built from them as columns (:class:`~.table.InsnTable`). A field of a row may
also be a 1-D int array: that row then stands for one instruction per element. Lowering uses
this to emit many near-identical instruction sequences at once (:meth:`ProgramBuilder.state`,
:meth:`~ProgramBuilder.restore`, :meth:`~ProgramBuilder.segment`: the token and micro-op logic
runs once per distinct builder state, the addresses as arrays; see :mod:`.lowering`).

Example (one 1×16 · 16×16 tile, see ``tests/test_vta_sim.py`` for more)::

    b = ProgramBuilder()
    x = b.alloc("x", "INP", (1, 1, 16)); w = b.alloc("w", "WGT", (1, 16, 16))
    y = b.alloc("y", "OUT", (1, 1, 16))
    k = b.kernel([Uop(0, 0, 0)])
    b.load(x, sram_base=0, y_size=1, x_size=1); b.load(w, sram_base=0, y_size=1, x_size=1)
    b.dep_push(Engine.LOAD, Engine.COMPUTE); b.dep_pop(Engine.LOAD, Engine.COMPUTE)
    b.gemm(k, reset=True); b.gemm(k)
    b.dep_push(Engine.COMPUTE, Engine.STORE); b.dep_pop(Engine.COMPUTE, Engine.STORE)
    b.store(y, sram_base=0, y_size=1, x_size=1)
    program = b.finish()
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from heronlike.errors import VTAProgramError

from .config import VTAConfig
from .isa import AluOp, Engine, Instruction, MemId, Opcode, Uop
from .program import UOP_BUFFER, DramBuffer, Program
from .table import IDX, NF, InsnTable, row_of

#: DRAM buffers start on multiples of this many bytes (at least every element size)
DRAM_ALIGN = 4096

#: a builder row: one value per field of :data:`~.table.FIELDS` (ints, or 1-D int arrays in a
#: recorded segment)
Row = list[Any]
#: a builder's state between two instructions (:meth:`ProgramBuilder.state`), hashable
State = tuple[Any, ...]

_OP, _MT, _DRAM = IDX["opcode"], IDX["memory_type"], IDX["dram_base"]
_POP_PREV, _POP_NEXT = IDX["pop_prev"], IDX["pop_next"]
_FLAG_IDX = {f: IDX[f] for f in ("pop_prev", "pop_next", "push_prev", "push_next")}
_LOAD, _STORE = int(Opcode.LOAD), int(Opcode.STORE)
_ENGINE_ROWS = (int(MemId.INP), int(MemId.WGT))


def _engine(row: Row) -> int:
    """The engine of a row (:func:`~.isa.engine_of`)."""
    op = row[_OP]
    if op == _STORE:
        return 2
    if op == _LOAD and row[_MT] in _ENGINE_ROWS:
        return 0
    return 1


def _mem_row(opcode: int, memory_type: int, **fields: Any) -> Row:
    row: Row = [0] * NF
    row[_OP], row[_MT] = opcode, memory_type
    for name, v in fields.items():
        row[IDX[name]] = v
    return row


@dataclass(frozen=True)
class UopKernel:
    """A micro-op sequence in the DRAM micro-op table: ``length`` micro-ops from ``offset``."""

    offset: int
    length: int


@dataclass(frozen=True)
class Segment:
    """The instructions a builder emitted since :meth:`ProgramBuilder.restore`.

    Attributes:
        rows: the new rows, in order.
        patch: flags (name → 1) set on the instruction before the segment (a
            :meth:`~ProgramBuilder.dep_push` that marked it), empty if none.
        uop_fixups: (index into ``rows``, micro-op table offset) of every LOAD UOP: its
            ``dram_base`` is the micro-op buffer's element base plus the offset.
    """

    rows: list[Row]
    patch: dict[str, int]
    uop_fixups: list[tuple[int, int]]


class ProgramBuilder:
    """Assembles one :class:`~.program.Program` (see the module docstring).

    Args:
        config: the hardware (default :class:`~.config.VTAConfig`).
    """

    def __init__(self, config: VTAConfig | None = None) -> None:
        self.config = config or VTAConfig()
        self._rows: list[Row] = []
        self.buffers: dict[str, DramBuffer] = {}
        self._top = 0  # next free DRAM byte
        self._uops: list[tuple[int, int, int]] = []
        self._kernels: dict[tuple[tuple[int, int, int], ...], UopKernel] = {}
        self._uop_fixups: list[tuple[int, int]] = []  # (row index, table offset)
        self._resident: dict[UopKernel, int] = {}  # kernel → micro-op buffer base
        self._uop_top = 0
        self._pending = [[False, False] for _ in Engine]  # (pop_prev, pop_next) per engine
        self._seg_start = 0  # first row of the segment being recorded (after restore)
        self._fake_prev: Row | None = None  # the stand-in for the row before the segment

    @property
    def insns(self) -> list[Instruction]:
        """The instructions emitted so far, as objects (micro-op loads not yet placed)."""
        return list(InsnTable.from_rows(self._rows[self._seg_start :]).instructions())

    def __len__(self) -> int:
        """Rows emitted so far."""
        return len(self._rows) - self._seg_start

    # -- DRAM -------------------------------------------------------------------------------
    def alloc(self, name: str, kind: str, shape: Sequence[int]) -> DramBuffer:
        """A DRAM buffer of ``kind`` elements (``"INP"``, ``"WGT"``, ``"ACC"``, ``"ACC_8BIT"`` or
        ``"OUT"``) with numpy ``shape`` = leading dims + the element shape of ``kind``.

        Raises:
            VTAProgramError: a duplicate name, an unknown kind, or trailing dims that are not the
                element shape.
        """
        cfg = self.config
        if name in self.buffers or name.startswith("__"):
            raise VTAProgramError(f"DRAM buffer name {name!r} is taken or reserved")
        if kind not in ("INP", "WGT", "ACC", "ACC_8BIT", "OUT"):
            raise VTAProgramError(f"unknown DRAM buffer kind {kind!r}")
        shape = tuple(int(s) for s in shape)
        elem = cfg.elem_shape(kind)
        if shape[-len(elem) :] != elem or len(shape) < len(elem) or min(shape) < 1:
            raise VTAProgramError(f"{name}: shape {shape} must end with the {kind} element {elem}")
        return self._place(name, kind, shape)

    def _place(self, name: str, kind: str, shape: tuple[int, ...]) -> DramBuffer:
        cfg = self.config
        buf = DramBuffer(name, kind, self._top, shape, cfg.elem_dtype(kind), cfg.elem_bytes(kind))
        self._top += -(-max(buf.nbytes, 1) // DRAM_ALIGN) * DRAM_ALIGN
        self.buffers[name] = buf
        return buf

    def uop_buffer(self) -> DramBuffer:
        """The DRAM micro-op table, placed after every buffer on first call (by :meth:`build`)."""
        ubuf = self.buffers.get(UOP_BUFFER)
        if ubuf is None:
            ubuf = self._place(UOP_BUFFER, "UOP", (max(len(self._uops), 1),))
        return ubuf

    # -- micro-ops --------------------------------------------------------------------------
    def kernel(self, uops: Iterable[Uop | tuple[int, int, int]]) -> UopKernel:
        """Put a micro-op sequence in the DRAM micro-op table (identical sequences are shared).

        Raises:
            VTAProgramError: an empty kernel or one larger than the micro-op buffer.
        """
        rows = tuple(
            (u.dst_idx, u.src_idx, u.wgt_idx) if isinstance(u, Uop) else tuple(map(int, u))
            for u in uops
        )
        if not rows or len(rows) > self.config.depth("UOP"):
            raise VTAProgramError(
                f"a micro-op kernel holds 1..{self.config.depth('UOP')} micro-ops, not {len(rows)}"
            )
        found = self._kernels.get(rows)
        if found is None:
            found = self._kernels[rows] = UopKernel(len(self._uops), len(rows))
            self._uops.extend(rows)
        return found

    def use_kernel(self, kernel: UopKernel) -> int:
        """Make ``kernel`` resident in the micro-op buffer, emitting a LOAD UOP if it is not;
        returns its base index there."""
        base = self._resident.get(kernel)
        if base is not None:
            return base
        depth = self.config.depth("UOP")
        if self._uop_top + kernel.length > depth:
            self._uop_top = 0
        base, end = self._uop_top, self._uop_top + kernel.length
        self._resident = {
            k: b for k, b in self._resident.items() if b + k.length <= base or b >= end
        }
        self._resident[kernel] = base
        self._uop_top = end
        self._uop_fixups.append((len(self._rows), kernel.offset))
        self._append(
            _mem_row(
                _LOAD,
                int(MemId.UOP),
                sram_base=base,
                y_size=1,
                x_size=kernel.length,
                x_stride=kernel.length,
            )
        )
        return base

    # -- instructions -------------------------------------------------------------------------
    def emit(self, insn: Instruction) -> int:
        """Append an instruction as given, plus any pending pops of its engine; returns its index.
        (Use this for hand-written token programs; fields are checked at :meth:`finish`.)"""
        return self._append(row_of(insn))

    def _append(self, row: Row) -> int:
        pend = self._pending[_engine(row)]
        if pend[0] or pend[1]:
            row[_POP_PREV] = 1 if row[_POP_PREV] or pend[0] else 0
            row[_POP_NEXT] = 1 if row[_POP_NEXT] or pend[1] else 0
            pend[0] = pend[1] = False
        self._rows.append(row)
        return len(self._rows) - 1 - self._seg_start

    def load(
        self,
        buf: DramBuffer,
        *,
        sram_base: int,
        y_size: int,
        x_size: int,
        at: int | Sequence[int] = 0,
        x_stride: int | None = None,
        pad: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> int:
        """2-D load of ``y_size`` rows × ``x_size`` elements of ``buf`` into its SRAM at
        ``sram_base`` (elements), from element ``at`` (flat offset or leading-dim index), rows
        ``x_stride`` elements apart (default ``x_size``), zero-padded by ``pad`` = (y_pad_0,
        y_pad_1, x_pad_0, x_pad_1), each ≤ 15. INP/WGT loads run on the load engine, ACC loads
        on compute. In a recorded segment, ``at``, sizes and pads may be int arrays."""
        if buf.kind == "OUT":
            raise VTAProgramError(f"{buf.name}: OUT buffers are store-only")
        y0, y1, x0, x1 = pad
        return self._append(
            _mem_row(
                _LOAD,
                int(MemId[buf.kind]),
                sram_base=sram_base,
                dram_base=self._dram_base(buf, at),
                y_size=y_size,
                x_size=x_size,
                x_stride=x_size if x_stride is None else x_stride,
                y_pad_0=y0,
                y_pad_1=y1,
                x_pad_0=x0,
                x_pad_1=x1,
            )
        )

    def store(
        self,
        buf: DramBuffer,
        *,
        sram_base: int,
        y_size: int,
        x_size: int,
        at: int | Sequence[int] = 0,
        x_stride: int | None = None,
    ) -> int:
        """2-D store of accumulator elements ``[sram_base, sram_base + y_size·x_size)``,
        truncated to the output dtype, to the OUT buffer ``buf`` (rows ``x_stride`` apart)."""
        if buf.kind != "OUT":
            raise VTAProgramError(f"{buf.name}: stores write OUT buffers, not {buf.kind}")
        return self._append(
            _mem_row(
                _STORE,
                int(MemId.OUT),
                sram_base=sram_base,
                dram_base=self._dram_base(buf, at),
                y_size=y_size,
                x_size=x_size,
                x_stride=x_size if x_stride is None else x_stride,
            )
        )

    def gemm(
        self,
        kernel: UopKernel,
        *,
        iter_out: int = 1,
        iter_in: int = 1,
        dst: tuple[int, int] = (0, 0),
        src: tuple[int, int] = (0, 0),
        wgt: tuple[int, int] = (0, 0),
        reset: bool = False,
    ) -> int:
        """GEMM over ``kernel`` in ``for o < iter_out: for i < iter_in``; each pair is the
        (out, in) factor of that index (vta.md §2.3). Loads the kernel if not resident."""
        base = self.use_kernel(kernel)
        return self._append(
            _mem_row(
                int(Opcode.GEMM),
                0,
                reset=int(bool(reset)),
                uop_bgn=base,
                uop_end=base + kernel.length,
                iter_out=iter_out,
                iter_in=iter_in,
                dst_factor_out=dst[0],
                dst_factor_in=dst[1],
                src_factor_out=src[0],
                src_factor_in=src[1],
                wgt_factor_out=wgt[0],
                wgt_factor_in=wgt[1],
            )
        )

    def alu(
        self,
        op: AluOp,
        kernel: UopKernel,
        *,
        imm: int | None = None,
        iter_out: int = 1,
        iter_in: int = 1,
        dst: tuple[int, int] = (0, 0),
        src: tuple[int, int] = (0, 0),
        reset: bool = False,
    ) -> int:
        """ALU ``acc[dst] = op(acc[dst], imm)`` (``imm`` given) or ``op(acc[dst], acc[src])``
        over ``kernel`` in the same two-level loop as :meth:`gemm`."""
        base = self.use_kernel(kernel)
        return self._append(
            _mem_row(
                int(Opcode.ALU),
                0,
                reset=int(bool(reset)),
                uop_bgn=base,
                uop_end=base + kernel.length,
                iter_out=iter_out,
                iter_in=iter_in,
                dst_factor_out=dst[0],
                dst_factor_in=dst[1],
                src_factor_out=src[0],
                src_factor_in=src[1],
                alu_opcode=int(AluOp(op)),
                use_imm=int(imm is not None),
                imm=0 if imm is None else imm,
            )
        )

    # -- tokens ---------------------------------------------------------------------------------
    def dep_pop(self, src: Engine, dst: Engine) -> None:
        """The next instruction of engine ``dst`` waits for a token from ``src``."""
        self._check_pair(src, dst)
        flag = 0 if src < dst else 1  # pop_prev, pop_next
        if self._pending[dst][flag]:
            self._nop(dst)
        self._pending[dst][flag] = True

    def dep_push(self, src: Engine, dst: Engine) -> None:
        """Engine ``src`` signals ``dst`` after everything it has been given so far."""
        self._check_pair(src, dst)
        flag = _FLAG_IDX["push_next" if src < dst else "push_prev"]
        if any(self._pending[src]):
            self._nop(src)
        last = self._rows[-1] if self._rows else None
        if last is not None and _engine(last) == src and not last[flag]:
            last[flag] = 1
        else:
            self._nop(src, flag)

    def _nop(self, engine: Engine, flag: int | None = None) -> None:
        """A token-only no-op on ``engine`` (a transfer of zero elements, as the runtime did)."""
        opcode = _STORE if engine == Engine.STORE else _LOAD
        mem = {Engine.LOAD: MemId.INP, Engine.COMPUTE: MemId.UOP, Engine.STORE: MemId.OUT}[engine]
        row = _mem_row(opcode, int(mem))
        if flag is not None:
            row[flag] = 1
        self._append(row)

    @staticmethod
    def _check_pair(src: Engine, dst: Engine) -> None:
        if abs(int(src) - int(dst)) != 1:
            raise VTAProgramError(
                f"no token queue from {Engine(src).name} to {Engine(dst).name}: only neighbouring "
                "engines synchronise (load↔compute, compute↔store)"
            )

    # -- recorded segments (lowering many near-identical groups at once) -----------------------
    def state(self) -> State:
        """Everything the next instructions' token flags and micro-op loads depend on: pending
        pops, the engine and flags of the last instruction, the resident micro-op kernels."""
        last = self._rows[-1] if self._rows else None
        last_key = None if last is None else (_engine(last), *(last[i] for i in (1, 2, 3, 4)))
        return (
            tuple(tuple(p) for p in self._pending),
            last_key,
            tuple(sorted((k.offset, k.length, b) for k, b in self._resident.items())),
            self._uop_top,
        )

    def restore(self, state: State) -> None:
        """Start a segment from ``state`` (:meth:`state`): the rows so far are dropped, the last
        one replaced by a stand-in with the same engine and flags; :meth:`segment` then gives
        what was emitted after it."""
        pending, last_key, resident, top = state
        self._pending = [list(p) for p in pending]
        self._resident = {UopKernel(o, n): b for o, n, b in resident}
        self._uop_top = top
        self._uop_fixups = []
        if last_key is None:
            self._rows, self._fake_prev = [], None
        else:
            engine, *flags = last_key
            opcode = _STORE if engine == 2 else _LOAD
            mem = (MemId.INP, MemId.UOP, MemId.OUT)[engine]
            self._fake_prev = _mem_row(opcode, int(mem))
            for i, v in zip((1, 2, 3, 4), flags, strict=True):
                self._fake_prev[i] = v
            self._rows = [list(self._fake_prev)]
        self._seg_start = len(self._rows)

    def segment(self) -> Segment:
        """The rows emitted since :meth:`restore`, the flags they set on the row before, and
        their micro-op loads."""
        patch = {}
        if self._seg_start:
            assert self._fake_prev is not None
            for name, i in _FLAG_IDX.items():
                if self._rows[0][i] != self._fake_prev[i]:
                    patch[name] = int(self._rows[0][i])
        start = self._seg_start
        return Segment(self._rows[start:], patch, [(i - start, off) for i, off in self._uop_fixups])

    # -- finish ---------------------------------------------------------------------------------
    def close(self, *, sync: bool = True) -> None:
        """Emit what :meth:`finish` appends before building: the token round trips of ``sync``,
        no-ops for pending pops, and FINISH."""
        if sync:
            self.dep_push(Engine.STORE, Engine.COMPUTE)
            self.dep_push(Engine.LOAD, Engine.COMPUTE)
            self.dep_pop(Engine.STORE, Engine.COMPUTE)
            self.dep_pop(Engine.LOAD, Engine.COMPUTE)
        if any(self._pending[Engine.COMPUTE]):
            self._nop(Engine.COMPUTE)
        for e in (Engine.LOAD, Engine.STORE):
            if any(self._pending[e]):
                self._nop(e)
        self._append(_mem_row(int(Opcode.FINISH), 0))

    def finish(self, *, sync: bool = True) -> Program:
        """Append FINISH and return the program (validated).

        With ``sync`` (the default) the load and store engines first each push a token that
        compute pops, so FINISH waits for every DMA (``VTASynchronize``, vta.md §2.8).
        """
        self.close(sync=sync)
        return self.build()

    def build(self) -> Program:
        """The program as assembled so far (the last instruction must be FINISH), validated.

        Raises:
            VTAFieldError, VTATokenError, VTAProgramError: :func:`~.program.validate_program`.
        """
        ubuf = self.uop_buffer()
        rows = self._rows[self._seg_start :]
        for idx, offset in self._uop_fixups:
            rows[idx - self._seg_start] = list(rows[idx - self._seg_start])
            rows[idx - self._seg_start][_DRAM] = ubuf.elem_base + offset
        table = InsnTable.from_rows(rows)
        uops = np.array(self._uops, dtype=np.int64).reshape(-1, 3)
        program = Program(self.config, None, dict(self.buffers), uops, self._top, table=table)
        program.validate()
        return program

    def uop_table(self) -> np.ndarray:
        """The micro-op table so far, an ``(n, 3)`` int64 array."""
        return np.array(self._uops, dtype=np.int64).reshape(-1, 3)

    def _dram_base(self, buf: DramBuffer, at: Any) -> Any:
        """The DRAM element address of ``at`` in ``buf`` (an int, or an int64 array where ``at``
        holds arrays).

        Raises:
            VTAProgramError: an index outside the buffer.
        """
        if isinstance(at, int | np.integer):
            if not 0 <= at < buf.n_elems:
                raise VTAProgramError(f"{buf.name}: element {at} outside its {buf.n_elems}")
            return buf.elem_base + int(at)
        if isinstance(at, np.ndarray):
            bad = np.flatnonzero((at < 0) | (at >= buf.n_elems))
            if bad.size:
                return self._dram_base(buf, int(at[bad[0]]))  # raises
            return buf.elem_base + at.astype(np.int64)
        if any(isinstance(i, np.ndarray) for i in at):
            return buf.elems(*at)
        return buf.elem(*at)
