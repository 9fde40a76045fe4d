"""Per-instruction cycle costs of the VTA timing model (vta.md §4.3).

Every constant is a field of :class:`TimingParams`, named, documented with its source, and
**uncalibrated**: no VTA board or RTL run was available, so the values are the defensible
starting points of vta.md §4.3, with the plausible range (:data:`PLAUSIBLE_RANGES`) to sweep in a
sensitivity study. Architectural rates (bus bytes per cycle, element sizes) come from
:class:`~.config.VTAConfig` and are not tunable here.

Each DMA instruction's cost splits into a part that does not occupy the shared memory port
(fixed latency, per-row request overhead, zero-fill of padding) and ``beats`` cycles that do;
:mod:`.simulator` serialises the beats of all engines on one port.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from heronlike.errors import VTAConfigError

from .config import VTAConfig
from .isa import AluInsn, FinishInsn, GemmInsn, Instruction, MemId, MemInsn, Opcode


@dataclass(frozen=True)
class TimingParams:
    """Cycle constants (all uncalibrated; defaults = the PYNQ HLS profile, vta.md §4.3).

    Attributes:
        dma_latency: fixed cycles per DMA instruction before its first beat (L_dma). Source: the
            LPN model of the Chisel VTA (``jonas-kaufmann/simbricks-lpn``, ``lpn_funcs.hh``) uses
            22 for ACC/UOP loads; vta.md §4.3 adopts it for every DMA.
        read_row_overhead: cycles per DRAM row of a LOAD (INP/WGT/ACC) besides its beats
            (r_row): the HLS ``load_2d`` issues one ``memcpy`` per row (vta.md §4.3). Range 0
            (fully pipelined) to 32 (one DRAM round trip per row); default 16.
        write_row_overhead: the same for each row of a STORE (r_row_w; ``store()`` per-row
            ``memcpy``). Default 8.
        uop_row_overhead: the same for a UOP load. Default 0: the LPN model charges UOP loads
            ``22 + ⌈bytes/8⌉`` only (vta.md §4.3 table).
        pad_cycles_per_elem: cycles to zero-fill one padded SRAM element (HLS ``reset_mem``
            writes one element per cycle). Default 1.
        gemm_fill: pipeline fill/drain cycles per GEMM instruction (c_g; LPN ``1 + 5``). Default 6.
        alu_fill: the same per ALU instruction (c_a). Default 6.
        loop_refill: cycles lost each time the pipelined micro-op loop is re-entered, i.e.
            ``iter_out · iter_in − 1`` times per GEMM/ALU (d_in): the HLS loop nest is not
            flattened. Default 4 (PYNQ HLS), 0 for the Chisel profile; range 0–8.
        gemm_cycles_per_uop: initiation interval of GEMM micro-ops (``vta.cc`` pipeline
            pragma II = 1; ``hardware.rst``). Default 1.
        alu_cycles_per_uop: II of ALU micro-ops with a tensor operand (II = 2: single-ported
            register file, ``hardware.rst``). Default 2.
        alu_imm_cycles_per_uop: II of ALU micro-ops with an immediate. Default 2 for HLS; the
            Chisel/LPN model uses ``2 − use_imm`` = 1.
        sync_cycles: cost of FINISH and of a token-only no-op (LPN: 2 for sync ops). Default 2.
        fetch_bytes_per_insn: DRAM bytes fetch reads per instruction (128-bit instructions;
            architectural). Default 16.
        fetch_latency: fixed cycles before a fetch burst's beats (as ``dma_latency``). Charged
            on the first burst and after the fetcher stalled. Default 22.
        fetch_burst: instructions fetched per bus request. Default 16 (a 256-byte burst).
        cmd_queue_depth: command-queue entries per engine (``vivado.tcl``: 512 deep);
            architectural. Fetch stalls when the target queue is full.
        token_queue_depth: dependency-token FIFO depth (``vivado.tcl``: 1024); architectural.
            Exceeding it is reported as a protocol error.
    """

    dma_latency: int = 22
    read_row_overhead: int = 16
    write_row_overhead: int = 8
    uop_row_overhead: int = 0
    pad_cycles_per_elem: int = 1
    gemm_fill: int = 6
    alu_fill: int = 6
    loop_refill: int = 4
    gemm_cycles_per_uop: int = 1
    alu_cycles_per_uop: int = 2
    alu_imm_cycles_per_uop: int = 2
    sync_cycles: int = 2
    fetch_bytes_per_insn: int = 16
    fetch_latency: int = 22
    fetch_burst: int = 16
    cmd_queue_depth: int = 512
    token_queue_depth: int = 1024

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise VTAConfigError(f"TimingParams.{f.name} must be a non-negative int, not {v!r}")
        for name in ("gemm_cycles_per_uop", "fetch_burst", "cmd_queue_depth", "token_queue_depth"):
            if getattr(self, name) < 1:
                raise VTAConfigError(f"TimingParams.{name} must be at least 1")

    @classmethod
    def pynq_hls(cls) -> TimingParams:
        """The default: the Vivado HLS design on PYNQ-Z2 that Heron measured."""
        return cls()

    @classmethod
    def chisel(cls) -> TimingParams:
        """A Chisel/tsim-like profile: flattened micro-op loop (d_in = 0), ALU II = 2 − use_imm."""
        return cls(loop_refill=0, alu_imm_cycles_per_uop=1)

    def with_(self, **changes: int) -> TimingParams:
        """A copy with some constants changed (e.g. for a sensitivity sweep)."""
        return replace(self, **changes)


#: constants with no measurement behind them (all but the architectural ones)
UNCALIBRATED: tuple[str, ...] = (
    "dma_latency",
    "read_row_overhead",
    "write_row_overhead",
    "uop_row_overhead",
    "pad_cycles_per_elem",
    "gemm_fill",
    "alu_fill",
    "loop_refill",
    "alu_imm_cycles_per_uop",
    "sync_cycles",
    "fetch_latency",
    "fetch_burst",
)

#: plausible (low, high) of each uncalibrated constant for sensitivity sweeps. r_row and d_in are
#: vta.md §4.3's ranges; the others are this model's judgement (about ½× to 2× the default).
PLAUSIBLE_RANGES: dict[str, tuple[int, int]] = {
    "dma_latency": (10, 40),
    "read_row_overhead": (0, 32),
    "write_row_overhead": (0, 16),
    "uop_row_overhead": (0, 16),
    "pad_cycles_per_elem": (1, 2),
    "gemm_fill": (3, 12),
    "alu_fill": (3, 12),
    "loop_refill": (0, 8),
    "alu_imm_cycles_per_uop": (1, 2),
    "sync_cycles": (1, 4),
    "fetch_latency": (10, 40),
    "fetch_burst": (8, 64),
}


@dataclass(frozen=True, slots=True)
class Cost:
    """An instruction's cost in cycles: ``pre`` off the memory port, then ``beats`` on it."""

    pre: int
    beats: int = 0
    dma_bytes: int = 0

    @property
    def total(self) -> int:
        """Uncontended cycles (pre + beats)."""
        return self.pre + self.beats


def mem_cost(insn: MemInsn, config: VTAConfig, t: TimingParams) -> Cost:
    """LOAD/STORE cost (vta.md §4.3): ``L_dma + Σ_rows (r_row + ⌈x_size·E/B⌉) + n_pad``.

    E is the DRAM element size of the memory type (INP 16, WGT 256, ACC 64, ACC_8BIT 16,
    OUT 16, UOP 4 bytes), B the bus bytes per cycle, n_pad the zero-filled SRAM elements.
    ``dma_bytes`` counts payload only (padding excluded, as fsim's counters do).
    """
    if insn.is_nop:
        return Cost(t.sync_cycles)
    if insn.opcode == Opcode.STORE:
        kind, row = "OUT", t.write_row_overhead
    else:
        kind = insn.memory_type.name
        row = t.uop_row_overhead if insn.memory_type == MemId.UOP else t.read_row_overhead
    row_bytes = insn.x_size * config.elem_bytes(kind)
    beats = insn.y_size * math.ceil(row_bytes / config.bus_bytes)
    n_pad = insn.sram_elems - insn.payload_elems
    pre = t.dma_latency + insn.y_size * row + n_pad * t.pad_cycles_per_elem
    return Cost(pre, beats, insn.y_size * row_bytes)


def loop_cost(insn: GemmInsn | AluInsn, t: TimingParams) -> Cost:
    """GEMM: ``c_g + II_g·N_u + d_in·(iter_out·iter_in − 1)``; ALU: ``c_a + II_a·N_u + d_in·(…)``
    with II_a = ``alu_imm_cycles_per_uop`` or ``alu_cycles_per_uop`` (vta.md §4.3). A GEMM/ALU
    that runs no micro-op costs ``sync_cycles`` (a token-only no-op)."""
    n = insn.n_uops
    if n == 0:
        return Cost(t.sync_cycles)
    refill = t.loop_refill * (insn.iter_out * insn.iter_in - 1)
    if isinstance(insn, GemmInsn):
        return Cost(t.gemm_fill + t.gemm_cycles_per_uop * n + refill)
    ii = t.alu_imm_cycles_per_uop if insn.use_imm else t.alu_cycles_per_uop
    return Cost(t.alu_fill + ii * n + refill)


def cost(insn: Instruction, config: VTAConfig, t: TimingParams) -> Cost:
    """The cost of any instruction (FINISH: ``sync_cycles``)."""
    if isinstance(insn, MemInsn):
        return mem_cost(insn, config, t)
    if isinstance(insn, GemmInsn | AluInsn):
        return loop_cost(insn, t)
    assert isinstance(insn, FinishInsn)
    return Cost(t.sync_cycles)
