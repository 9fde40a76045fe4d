"""The VTA instruction set as data: opcodes, instructions, micro-ops, engines and token queues.

Restated from vta.md §2.3 (``hw_spec.h``, ``hardware.rst`` "Instruction Set Architecture"):

* LOAD/STORE (:class:`MemInsn`): a 2-D strided DMA of ``y_size`` rows × ``x_size`` elements,
  DRAM row stride ``x_stride`` elements, SRAM written densely; loads may zero-pad
  (``y_pad_0``/``y_pad_1`` whole rows before/after, ``x_pad_0``/``x_pad_1`` elements around each
  row, each at most 15). Addresses count elements of the buffer named by ``memory_type``.
* GEMM (:class:`GemmInsn`) and ALU (:class:`AluInsn`) run micro-ops ``[uop_bgn, uop_end)`` of the
  micro-op buffer inside ``for o in range(iter_out): for i in range(iter_in):``; each index is
  ``uop.idx + o * factor_out + i * factor_in``.
* FINISH (:class:`FinishInsn`) ends the program.
* Every instruction carries four dependency-token flags, read per engine (:data:`TOKEN_QUEUES`).

Field widths and the 128-bit encoding are in :mod:`.encoding`; semantics in :mod:`.numerics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from heronlike.errors import VTATokenError


class Opcode(IntEnum):
    """3-bit instruction opcode (vta.md §2.3)."""

    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemId(IntEnum):
    """3-bit memory type of a LOAD/STORE (vta.md §2.3). ACC_8BIT loads int8 from DRAM and
    sign-extends it into the accumulator."""

    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5


class AluOp(IntEnum):
    """3-bit ALU opcode (vta.md §2.3). SHR by a negative amount shifts left. MUL exists in fsim
    and TVM's ALU lowering, not in the PYNQ HLS design."""

    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4


class Engine(IntEnum):
    """The three in-order engines, in pipeline order (so "prev" is the lower number)."""

    LOAD = 0
    COMPUTE = 1
    STORE = 2


class TokenQueue(IntEnum):
    """The four 1-bit dependency-token FIFOs (vta.md §2.2)."""

    L2G = 0  # load → compute: INP/WGT data ready (RAW)
    G2L = 1  # compute → load: INP/WGT buffer may be overwritten (WAR)
    G2S = 2  # compute → store: results ready (RAW)
    S2G = 3  # store → compute: accumulator/out buffer may be overwritten (WAR)


@dataclass(frozen=True, slots=True, kw_only=True)
class Insn:
    """Common header: the dependency-token flags (vta.md §2.3). An instruction pops its tokens
    before it executes and pushes after it finishes; :data:`TOKEN_QUEUES` says which queue a
    flag means on each engine."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MemInsn(Insn):
    """LOAD or STORE: a 2-D strided DMA between DRAM and the SRAM named by ``memory_type``.

    ``sram_base`` and ``dram_base`` count elements of that buffer (e.g. 16-byte INP vectors,
    256-byte WGT blocks). A STORE reads the accumulator at ``sram_base`` and writes OUT elements
    (the accumulator truncated to the output width). ``y_size == 0`` or ``x_size == 0`` moves
    nothing: a token-only no-op.
    """

    opcode: Opcode
    memory_type: MemId
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0

    @property
    def is_nop(self) -> bool:
        """Moves no data (the runtime's token-only no-op)."""
        return self.y_size == 0 or self.x_size == 0

    @property
    def sram_elems(self) -> int:
        """SRAM elements written (loads, padding included) or read (stores)."""
        if self.is_nop:
            return 0
        rows = self.y_pad_0 + self.y_size + self.y_pad_1
        return rows * (self.x_pad_0 + self.x_size + self.x_pad_1)

    @property
    def payload_elems(self) -> int:
        """Elements moved over the bus (padding excluded, as fsim counts bytes)."""
        return 0 if self.is_nop else self.y_size * self.x_size


@dataclass(frozen=True, slots=True, kw_only=True)
class _LoopInsn(Insn):
    reset: bool = False
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0

    @property
    def n_uops(self) -> int:
        """Micro-ops executed: iter_out × iter_in × (uop_end − uop_bgn)."""
        return self.iter_out * self.iter_in * max(self.uop_end - self.uop_bgn, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmInsn(_LoopInsn):
    """GEMM: for each expanded micro-op, ``acc[dst] += inp[src] @ wgt[wgt].T`` (int8 × int8 →
    int32, BATCH × BLOCK_IN by BLOCK_OUT × BLOCK_IN), or ``acc[dst] = 0`` with ``reset``.

    ``src`` indexes INP, ``wgt`` WGT, ``dst`` ACC (vta.md §2.3/§2.4).
    """

    wgt_factor_out: int = 0
    wgt_factor_in: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AluInsn(_LoopInsn):
    """ALU: for each expanded micro-op, ``acc[dst] = op(acc[dst], imm if use_imm else
    acc[src])`` lane-wise on int32, or ``acc[dst] = 0`` with ``reset`` (vta.md §2.3).

    ``imm`` is a signed 16-bit immediate; for SHR it is the shift (negative: shift left).
    """

    alu_opcode: AluOp = AluOp.ADD
    use_imm: bool = False
    imm: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishInsn(Insn):
    """FINISH: the compute engine signals the host that the program is done."""


Instruction = MemInsn | GemmInsn | AluInsn | FinishInsn


@dataclass(frozen=True, slots=True)
class Uop:
    """A 32-bit micro-op (vta.md §2.3): ``dst_idx`` (ACC element), ``src_idx`` (INP element for
    GEMM, ACC element for ALU), ``wgt_idx`` (WGT element; unused by ALU)."""

    dst_idx: int
    src_idx: int = 0
    wgt_idx: int = 0


def opcode_of(insn: Instruction) -> Opcode:
    """The opcode an instruction encodes with."""
    if isinstance(insn, MemInsn):
        return insn.opcode
    if isinstance(insn, GemmInsn):
        return Opcode.GEMM
    if isinstance(insn, AluInsn):
        return Opcode.ALU
    return Opcode.FINISH


def engine_of(insn: Instruction) -> Engine:
    """The engine fetch routes an instruction to (vta.md §2.2, ``vta.cc`` ``fetch()``): STORE →
    store; LOAD of INP or WGT → load; LOAD of UOP, ACC or ACC_8BIT, GEMM, ALU, FINISH → compute.
    """
    if isinstance(insn, MemInsn):
        if insn.opcode == Opcode.STORE:
            return Engine.STORE
        if insn.memory_type in (MemId.INP, MemId.WGT):
            return Engine.LOAD
    return Engine.COMPUTE


#: (engine, flag) → token queue (vta.md §2.3): the load engine has only "next" flags, the store
#: engine only "prev" flags; compute has all four.
TOKEN_QUEUES: dict[tuple[Engine, str], TokenQueue] = {
    (Engine.LOAD, "pop_next"): TokenQueue.G2L,
    (Engine.LOAD, "push_next"): TokenQueue.L2G,
    (Engine.COMPUTE, "pop_prev"): TokenQueue.L2G,
    (Engine.COMPUTE, "pop_next"): TokenQueue.S2G,
    (Engine.COMPUTE, "push_prev"): TokenQueue.G2L,
    (Engine.COMPUTE, "push_next"): TokenQueue.G2S,
    (Engine.STORE, "pop_prev"): TokenQueue.G2S,
    (Engine.STORE, "push_prev"): TokenQueue.S2G,
}


def token_io(
    insn: Instruction, engine: Engine | None = None
) -> tuple[tuple[TokenQueue, ...], tuple[TokenQueue, ...]]:
    """(queues popped, queues pushed) by ``insn`` on its engine.

    Raises:
        VTATokenError: a flag set that the engine has no queue for (e.g. ``pop_prev`` on a load,
            ``push_next`` on a store).
    """
    engine = engine_of(insn) if engine is None else engine
    pops, pushes = [], []
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        if getattr(insn, flag):
            queue = TOKEN_QUEUES.get((engine, flag))
            if queue is None:
                raise VTATokenError(
                    f"{type(insn).__name__} runs on the {engine.name.lower()} engine, which has "
                    f"no queue for {flag}"
                )
            (pops if flag.startswith("pop") else pushes).append(queue)
    return tuple(pops), tuple(pushes)
