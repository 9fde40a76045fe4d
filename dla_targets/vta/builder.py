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
from dataclasses import dataclass, replace

import numpy as np

from heronlike.errors import VTAProgramError

from .config import VTAConfig
from .isa import (
    AluInsn,
    AluOp,
    Engine,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Opcode,
    Uop,
    engine_of,
)
from .program import UOP_BUFFER, DramBuffer, Program

#: DRAM buffers start on multiples of this many bytes (at least every element size)
DRAM_ALIGN = 4096


@dataclass(frozen=True)
class UopKernel:
    """A micro-op sequence in the DRAM micro-op table: ``length`` micro-ops from ``offset``."""

    offset: int
    length: int


class ProgramBuilder:
    """Assembles one :class:`~.program.Program` (see the module docstring).

    Args:
        config: the hardware (default :class:`~.config.VTAConfig`).
    """

    def __init__(self, config: VTAConfig | None = None) -> None:
        self.config = config or VTAConfig()
        self.insns: list[Instruction] = []
        self.buffers: dict[str, DramBuffer] = {}
        self._top = 0  # next free DRAM byte
        self._uops: list[tuple[int, int, int]] = []
        self._kernels: dict[tuple[tuple[int, int, int], ...], UopKernel] = {}
        self._uop_fixups: list[tuple[int, int]] = []  # (instruction index, table offset)
        self._resident: dict[UopKernel, int] = {}  # kernel → micro-op buffer base
        self._uop_top = 0
        self._pending = {e: {"pop_prev": False, "pop_next": False} for e in Engine}

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
        self._uop_fixups.append((len(self.insns), kernel.offset))
        self.emit(
            MemInsn(
                opcode=Opcode.LOAD,
                memory_type=MemId.UOP,
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
        e = engine_of(insn)
        pend = self._pending[e]
        if pend["pop_prev"] or pend["pop_next"]:
            insn = replace(
                insn,
                pop_prev=insn.pop_prev or pend["pop_prev"],
                pop_next=insn.pop_next or pend["pop_next"],
            )
            pend["pop_prev"] = pend["pop_next"] = False
        self.insns.append(insn)
        return len(self.insns) - 1

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
        on compute."""
        if buf.kind == "OUT":
            raise VTAProgramError(f"{buf.name}: OUT buffers are store-only")
        y0, y1, x0, x1 = pad
        return self.emit(
            MemInsn(
                opcode=Opcode.LOAD,
                memory_type=MemId[buf.kind],
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
        return self.emit(
            MemInsn(
                opcode=Opcode.STORE,
                memory_type=MemId.OUT,
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
        return self.emit(
            GemmInsn(
                reset=reset,
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
        return self.emit(
            AluInsn(
                reset=reset,
                uop_bgn=base,
                uop_end=base + kernel.length,
                iter_out=iter_out,
                iter_in=iter_in,
                dst_factor_out=dst[0],
                dst_factor_in=dst[1],
                src_factor_out=src[0],
                src_factor_in=src[1],
                alu_opcode=AluOp(op),
                use_imm=imm is not None,
                imm=0 if imm is None else imm,
            )
        )

    # -- tokens ---------------------------------------------------------------------------------
    def dep_pop(self, src: Engine, dst: Engine) -> None:
        """The next instruction of engine ``dst`` waits for a token from ``src``."""
        self._check_pair(src, dst)
        flag = "pop_prev" if src < dst else "pop_next"
        if self._pending[dst][flag]:
            self._nop(dst)
        self._pending[dst][flag] = True

    def dep_push(self, src: Engine, dst: Engine) -> None:
        """Engine ``src`` signals ``dst`` after everything it has been given so far."""
        self._check_pair(src, dst)
        flag = "push_next" if src < dst else "push_prev"
        if any(self._pending[src].values()):
            self._nop(src)
        last = self.insns[-1] if self.insns else None
        if last is not None and engine_of(last) == src and not getattr(last, flag):
            self.insns[-1] = replace(last, **{flag: True})
        else:
            self._nop(src, **{flag: True})

    def _nop(self, engine: Engine, **flags: bool) -> None:
        """A token-only no-op on ``engine`` (a transfer of zero elements, as the runtime did)."""
        opcode = Opcode.STORE if engine == Engine.STORE else Opcode.LOAD
        mem = {Engine.LOAD: MemId.INP, Engine.COMPUTE: MemId.UOP, Engine.STORE: MemId.OUT}[engine]
        self.emit(MemInsn(opcode=opcode, memory_type=mem, **flags))

    @staticmethod
    def _check_pair(src: Engine, dst: Engine) -> None:
        if abs(int(src) - int(dst)) != 1:
            raise VTAProgramError(
                f"no token queue from {Engine(src).name} to {Engine(dst).name}: only neighbouring "
                "engines synchronise (load↔compute, compute↔store)"
            )

    # -- finish ---------------------------------------------------------------------------------
    def finish(self, *, sync: bool = True) -> Program:
        """Append FINISH and return the program (validated).

        With ``sync`` (the default) the load and store engines first each push a token that
        compute pops, so FINISH waits for every DMA (``VTASynchronize``, vta.md §2.8).
        """
        if sync:
            self.dep_push(Engine.STORE, Engine.COMPUTE)
            self.dep_push(Engine.LOAD, Engine.COMPUTE)
            self.dep_pop(Engine.STORE, Engine.COMPUTE)
            self.dep_pop(Engine.LOAD, Engine.COMPUTE)
        if any(self._pending[Engine.COMPUTE].values()):
            self._nop(Engine.COMPUTE)
        for e in (Engine.LOAD, Engine.STORE):
            if any(self._pending[e].values()):
                self._nop(e)
        self.emit(FinishInsn())
        return self.build()

    def build(self) -> Program:
        """The program as assembled so far (the last instruction must be FINISH)."""
        ubuf = self.buffers.get(UOP_BUFFER)
        if ubuf is None:
            ubuf = self._place(UOP_BUFFER, "UOP", (max(len(self._uops), 1),))
        insns = list(self.insns)
        for idx, offset in self._uop_fixups:
            insns[idx] = replace(insns[idx], dram_base=ubuf.elem_base + offset)
        uops = np.array(self._uops, dtype=np.int64).reshape(-1, 3)
        program = Program(self.config, tuple(insns), dict(self.buffers), uops, self._top)
        program.validate()
        return program

    def _dram_base(self, buf: DramBuffer, at: int | Sequence[int]) -> int:
        if isinstance(at, int | np.integer):
            if not 0 <= at < buf.n_elems:
                raise VTAProgramError(f"{buf.name}: element {at} outside its {buf.n_elems}")
            return buf.elem_base + int(at)
        return buf.elem(*at)
