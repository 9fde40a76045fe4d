"""Lowering a VTA candidate (GEMM, batched GEMM or 2-D convolution, optionally followed by a
requantisation epilogue) to a VTA program, and the build function the builder runs.

**Generated from the template's parameters, not lowered from the scheduled TIR.** The VTA
rules (:mod:`heronlike.rules.vta`) fix the loop structure of every candidate; the CSP
assignment fixes all it leaves open (tile sizes, virtual threads, tile order, GEMM folding,
aliased as ``vta.*`` variables). A code generator that reads those parameters emits exactly the
program the schedule describes, needs no TVM in the builder, and stays simple enough to audit
token by token. Lowering TIR would need what apache-tvm 0.27 no longer has (the coprocessor
sync and DMA-injection passes, vta.md §1) and a pattern matcher over the scheduled loops that
could only recover the same parameters. The scheduled TIR (``Space.apply(assignment).mod``)
stays a plain CPU program with the same tiling, the 1 × 16 × 16 intrinsic tensorized with a
loop implementation, and it is the second numerical oracle (``tests/test_vta_target.py``).

**Three computes, one program skeleton** (:func:`gemm_int32_program`, ``GemmParams.kind``):

* ``KIND_GEMM``: ``C (M, N) int32 = X (M, K) int8 @ W (N, K).T``;
* ``KIND_BMM``: ``C (B, M, N) = X (B, M, K) @ W (B, N, K).T`` per batch (``heronlike.ops.bmm``):
  the GEMM program once per batch, batch outermost (an operand tile never crosses batches);
* ``KIND_C2D``: ``heronlike.ops.c2d`` with N = 1, any stride, dilation and zero padding, as an
  **implicit GEMM**: M = output pixels (HO·WO), N = CO, K = CI·KH·KW. Chosen over an explicit
  im2col because VTA's 2-D DMA loads an input window of one channel block directly (rows of
  the feature map ``x_stride`` = W apart) and pads it on the fly, so the padded copy ``Xp`` of
  the TIR (and a KH·KW-fold im2col blow-up of DMA traffic) never exists; this is also how
  TVM's ``conv2d_packed`` template ran on VTA (vta.md §2.4, §3). Layouts are VTA's packed
  NCHW16c family: data ``(CI/16, H, W, 1, 16)``, kernel ``(CO/16, CI/16, KH, KW, 16, 16)``
  (vta.md §2.4), output pixel-major ``(P, 1, HO, WO, CO/16, 1, 16)`` (``P`` stores, below).
  An output tile is ``tile_h × tile_w`` output pixels × ``tile_n`` channel blocks; per channel
  block of the k tile one padded 2-D LOAD brings the ``((tile_h−1)·s + (KH−1)·d + 1) ×
  ((tile_w−1)·s + (KW−1)·d + 1)`` input window (padding ≤ 15 per side: the LOAD's 4-bit pad
  fields, vta.md §2.3). One GEMM instruction per k tile: micro-ops unrolled over
  ``(kh, oh, ow, co)``, ``iter_out`` over the tile's channel blocks, ``iter_in`` over ``kw``
  (both affine, vta.md §2.5 folding). Padding larger than ``(K−1)·d`` (a window of pure
  padding) is refused by the rules.

**Epilogue** (``GemmParams.epilogue``, from :func:`heronlike.ops.requantize` or any chain the
rules read as ALU work): a per-output-channel int32 bias add, ``± c``, ``>> c``, ``min``/``max``
with constants, then a cast to int8 (or an int32 result). Each operation is one ALU
instruction over the finished output tile of a thread, in order (vta.md §2.3, §2.4): ``SHR``,
``MIN``, ``MAX``, ``ADD`` with the immediate over the tile's element kernel; the bias add is an
``ADD`` with a tensor operand, ``acc[out (p, j)] += acc[bias j]``, over a ``tile_n``-micro-op
kernel with the tile's rows as ``iter_out``. The bias tile sits after each thread's output tile
in its accumulator half (``tile_n`` more accumulators per thread, which the rules count) and is
loaded by an ACC LOAD (compute engine) at the start of a group, skipped while the column tile
stays the same.

Program (all computes): output tiles in the order ``order`` picks, grouped by ``vthreads``: the
tiles of one group use alternate halves of the input, weight and accumulator buffers;

* per group: the bias tiles (if any and the columns changed), a reset GEMM per thread, then per
  ``k`` tile the DMA loads of every thread (they wait for the GEMM that last read that half),
  then every thread's GEMM (it waits for its loads); when ``K`` fits one tile and the previous
  group used the same input rows (or weight columns), those loads are skipped: the tile is
  still in that half;
* the epilogue's ALU instructions per thread, then the write-back. VTA's STORE truncates
  accumulators to the 8-bit output width (no saturation), so an int8 result (``P = 1``) is one
  STORE per tile, and an int32 result leaves as four byte planes (``P = 4``): store plane 0,
  ALU ``SHR 8``, store plane 1, … The DMA moves the same 4 bytes per element an int32 store
  would; the three ALU passes and the store↔compute round trips are real costs of VTA and are
  simulated as such.

Tokens are placed as TVM's coprocessor-sync pass did (load→compute after the loads,
compute→load after the GEMM that frees a half, compute→store before each store, store→compute
after it), so every pop has its push and the queues are empty at FINISH.

Data layout: the logical int8 operands (and the int32 bias, :func:`pack_bias`) are packed into
VTA's tiled DRAM layouts by the host (:func:`pack_inputs`), as VTA's runtime did, outside the
measured program; the result is unpacked to the logical shape by :func:`unpack_output` (int32
from 4 planes, or int8; both infer the compute from the array ranks, so :mod:`.runner` needs
only ``GemmParams.planes`` and ``bias_arg``).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from heronlike.errors import VTAProgramError
from heronlike.rules.vta import PARAMS, SRC_BIAS, SRC_IMM

from .builder import ProgramBuilder
from .config import VTAConfig
from .examples import pack_gemm_operands, unpack_gemm_output
from .isa import AluOp, Engine
from .program import Program

#: bytes of an int32 accumulator leaving VTA through 8-bit stores
PLANES = 4
#: format tag of the artifact the build function writes
ARTIFACT_FORMAT = "heronlike-vta-program/1"
#: ``GemmParams.kind`` values (the ``vta.kind`` CSP constant)
KIND_GEMM, KIND_BMM, KIND_C2D = 0, 1, 2
#: the fields every assignment names (the rules' ``vta.*`` variables of every compute, less
#: the compute's kind and batch, which default to a GEMM)
_REQUIRED = tuple(p for p in PARAMS if p not in ("kind", "batch"))
#: an ALU operation of the epilogue: (``AluOp`` value, immediate, operand ``SRC_IMM`` or
#: ``SRC_BIAS``) (:mod:`heronlike.rules.vta`)
EpilogueOp = tuple[int, int, int]


@dataclass(frozen=True)
class GemmParams:
    """A VTA candidate: extents in intrinsic blocks and the schedule's parameters (the
    ``vta.*`` variables of :mod:`heronlike.rules.vta`).

    Attributes:
        m_blocks, n_blocks, k_blocks: GEMM extents in BATCH rows, BLOCK_OUT and BLOCK_IN
            blocks (per batch for BMM; for C2D: HO·WO output pixels, CO/16, CI/16).
        tile_m, tile_n, tile_k: output rows (C2D: ``tile_h·tile_w`` pixels), output-channel
            blocks and reduction blocks of one tile.
        vthreads: virtual threads (1 or 2); order: 0 rows (pixels) outer, 1 columns outer;
            fold: GEMM rows as ``iter_in`` (GEMM/BMM only).
        kind: :data:`KIND_GEMM`, :data:`KIND_BMM` or :data:`KIND_C2D`; batch: BMM batches.
        in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride, pad, dilation: C2D geometry
            (pixels); tile_h, tile_w: output rows and columns of a C2D tile.
        out_int8: 1 when the result is int8 (one 8-bit store per tile), 0 for int32 (four byte
            planes). bias: 1 when the epilogue adds a per-output-channel int32 bias (the
            compute's parameter number ``bias_arg``). epilogue: the ALU operations run on each
            finished output tile, in order (:data:`EpilogueOp`; empty: none).
    """

    m_blocks: int
    n_blocks: int
    k_blocks: int
    tile_m: int
    tile_n: int
    tile_k: int
    vthreads: int = 1
    order: int = 0
    fold: int = 0
    kind: int = KIND_GEMM
    batch: int = 1
    in_h: int = 1
    in_w: int = 1
    out_h: int = 1
    out_w: int = 1
    kernel_h: int = 1
    kernel_w: int = 1
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    tile_h: int = 1
    tile_w: int = 1
    out_int8: int = 0
    bias: int = 0
    bias_arg: int = -1
    epilogue: tuple[EpilogueOp, ...] = ()

    @classmethod
    def from_assignment(cls, assignment: Mapping[str, int]) -> GemmParams:
        """Read the ``vta.*`` variables of a CSP assignment (optional ones default; the
        epilogue from ``vta.alu_ops`` and ``vta.alu{i}_op``, ``_imm``, ``_src``).

        Raises:
            VTAProgramError: a required variable is missing.
        """
        try:
            values: dict[str, Any] = {f: int(assignment[f"vta.{f}"]) for f in _REQUIRED}
        except KeyError as exc:
            raise VTAProgramError(f"assignment has no VTA parameter {exc}") from None
        for f in fields(cls):
            if f.name not in values and f.name != "epilogue" and f"vta.{f.name}" in assignment:
                values[f.name] = int(assignment[f"vta.{f.name}"])
        values["epilogue"] = epilogue_of(assignment)
        return cls(**values)

    def assignment(self) -> dict[str, int]:
        """The ``vta.*`` variables that :meth:`from_assignment` reads back as ``self``."""
        out = {f"vta.{f.name}": getattr(self, f.name) for f in fields(self) if f.name != "epilogue"}
        out["vta.alu_ops"] = len(self.epilogue)
        for i, (op, imm, src) in enumerate(self.epilogue):
            out.update({f"vta.alu{i}_op": op, f"vta.alu{i}_imm": imm, f"vta.alu{i}_src": src})
        return out

    @property
    def planes(self) -> int:
        """Stores per output tile: 1 for an int8 result, :data:`PLANES` for int32."""
        return 1 if self.out_int8 else PLANES

    @property
    def in_tile_h(self) -> int:
        """Input rows a C2D tile reads: ``(tile_h − 1)·stride + (KH − 1)·dilation + 1``."""
        return (self.tile_h - 1) * self.stride + (self.kernel_h - 1) * self.dilation + 1

    @property
    def in_tile_w(self) -> int:
        """Input columns a C2D tile reads (as :attr:`in_tile_h`)."""
        return (self.tile_w - 1) * self.stride + (self.kernel_w - 1) * self.dilation + 1

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the compute (for GOPS: ops = 2·macs)."""
        taps = self.kernel_h * self.kernel_w if self.kind == KIND_C2D else 1
        return self.batch * self.m_blocks * self.n_blocks * 16 * self.k_blocks * 16 * taps


def epilogue_of(assignment: Mapping[str, int]) -> tuple[EpilogueOp, ...]:
    """The epilogue's ALU operations named by ``vta.alu_ops`` and ``vta.alu{i}_*`` (empty
    without them).

    Raises:
        VTAProgramError: ``vta.alu_ops`` names an operation the assignment lacks.
    """
    try:
        return tuple(
            (
                int(assignment[f"vta.alu{i}_op"]),
                int(assignment[f"vta.alu{i}_imm"]),
                int(assignment[f"vta.alu{i}_src"]),
            )
            for i in range(int(assignment.get("vta.alu_ops", 0)))
        )
    except KeyError as exc:
        raise VTAProgramError(f"assignment has no VTA epilogue parameter {exc}") from None


def _check_tiling(p: GemmParams) -> None:
    mb, nb, kb = p.m_blocks, p.n_blocks, p.k_blocks
    bad = p.vthreads not in (1, 2) or nb % (p.tile_n * p.vthreads) or kb % p.tile_k
    if p.kind == KIND_C2D:
        bad = bad or p.out_h % p.tile_h or p.out_w % p.tile_w or p.batch != 1
        bad = bad or p.tile_m != p.tile_h * p.tile_w or mb != p.out_h * p.out_w
        bad = bad or p.pad > min(15, (p.kernel_h - 1) * p.dilation, (p.kernel_w - 1) * p.dilation)
    else:
        bad = bad or mb % p.tile_m
    if bad:
        raise VTAProgramError(f"parameters {p} do not tile {mb} × {nb} × {kb} blocks")
    for op, _, src in p.epilogue:
        if op not in {int(o) for o in AluOp} or src not in (SRC_IMM, SRC_BIAS):
            raise VTAProgramError(f"epilogue operation {(op, src)} of {p} is no VTA ALU op")
        if src == SRC_BIAS and (not p.bias or op != AluOp.ADD):
            raise VTAProgramError(f"epilogue of {p}: a bias operand needs bias = 1 and ADD")


def gemm_int32_program(p: GemmParams, config: VTAConfig | None = None) -> Program:
    """The VTA program of the int8 × int8 → int32 compute ``p`` describes, with its epilogue
    if it has one (module docstring).

    DRAM buffers (int8 unless said, element shapes of vta.md §2.4), with ``P`` = 4 byte planes
    for an int32 result and 1 for an int8 one (``p.planes``):

    * GEMM: ``A (M, K/16, 1, 16)``, ``W (N/16, K/16, 16, 16)``, ``C (P·M, N/16, 1, 16)``
      (byte plane ``q`` of the result in rows ``q·M …``);
    * BMM: ``A (B, M, K/16, 1, 16)``, ``W (B, N/16, K/16, 16, 16)``, ``C (P, B, M, N/16, 1, 16)``;
    * C2D: ``A (CI/16, H, W, 1, 16)``, ``W (CO/16, CI/16, KH, KW, 16, 16)``,
      ``C (P, 1, HO, WO, CO/16, 1, 16)``;
    * with a bias: ``bias (N/16, 1, 16)`` int32 (:func:`pack_bias`; shared by BMM batches).

    Raises:
        VTAProgramError: tiles that do not divide the extents, ``vthreads`` not in {1, 2} or
            not dividing the column tiles, C2D padding wider than the kernel window, an
            epilogue operation VTA's ALU lacks; the simulator's checks raise the rest (buffer
            overflow, fields, immediates, hazards).
    """
    cfg = config or VTAConfig()
    _check_tiling(p)
    mb, nb, kb = p.m_blocks, p.n_blocks, p.k_blocks
    tm, tn, tk, vt = p.tile_m, p.tile_n, p.tile_k, p.vthreads
    conv = p.kind == KIND_C2D
    no_n, ko_n = nb // (tn * vt), kb // tk
    if conv:
        th, tw, s, d = p.tile_h, p.tile_w, p.stride, p.dilation
        kh_n, kw_n = p.kernel_h, p.kernel_w
        in_th, in_tw = p.in_tile_h, p.in_tile_w
        spatial = [(ho, wo) for ho in range(p.out_h // th) for wo in range(p.out_w // tw)]
        inp_tile, wgt_tile = tk * in_th * in_tw, tn * tk * kh_n * kw_n
    else:
        spatial = [(mo,) for mo in range(mb // tm)]
        inp_tile, wgt_tile = tm * tk, tn * tk
    acc_tile = tm * tn
    # each thread's accumulator half: its output tile, then (with a bias) the bias tile
    acc_stride = acc_tile + (tn if p.bias else 0)
    planes = p.planes
    batches = range(p.batch if p.kind == KIND_BMM else 1)
    if p.order == 0:
        groups = [(bi, sp, no) for bi in batches for sp in spatial for no in range(no_n)]
    else:
        groups = [(bi, sp, no) for bi in batches for no in range(no_n) for sp in spatial]

    b = ProgramBuilder(cfg)
    inp_e, wgt_e, out_e = cfg.elem_shape("INP"), cfg.elem_shape("WGT"), cfg.elem_shape("OUT")
    if p.kind == KIND_GEMM:
        a_buf = b.alloc("A", "INP", (mb, kb, *inp_e))
        w_buf = b.alloc("W", "WGT", (nb, kb, *wgt_e))
        c_buf = b.alloc("C", "OUT", (planes * mb, nb, *out_e))
    elif p.kind == KIND_BMM:
        a_buf = b.alloc("A", "INP", (p.batch, mb, kb, *inp_e))
        w_buf = b.alloc("W", "WGT", (p.batch, nb, kb, *wgt_e))
        c_buf = b.alloc("C", "OUT", (planes, p.batch, mb, nb, *out_e))
    else:
        a_buf = b.alloc("A", "INP", (kb, p.in_h, p.in_w, *inp_e))
        w_buf = b.alloc("W", "WGT", (nb, kb, kh_n, kw_n, *wgt_e))
        c_buf = b.alloc("C", "OUT", (planes, 1, p.out_h, p.out_w, nb, *out_e))
    bias_buf = b.alloc("bias", "ACC", (nb, *cfg.elem_shape("ACC"))) if p.bias else None

    gemm_k, alu_k, bias_k = [], [], []
    for t in range(vt):
        ib, wb, ab = t * inp_tile, t * wgt_tile, t * acc_stride
        alu_k.append(b.kernel([(ab + e, ab + e, 0) for e in range(acc_tile)]))
        if p.bias:  # acc[out (row, j)] += acc[bias j]: tile_n micro-ops, rows as iter_out
            bias_k.append(b.kernel([(ab + j, ab + acc_tile + j, 0) for j in range(tn)]))
        if conv:
            gemm_k.append(
                b.kernel(
                    [
                        (
                            ab + (oh * tw + ow) * tn + j,
                            ib + (oh * s + kh * d) * in_tw + ow * s,
                            wb + j * tk * kh_n * kw_n + kh * kw_n,
                        )
                        for kh in range(kh_n)
                        for oh in range(th)
                        for ow in range(tw)
                        for j in range(tn)
                    ]
                )
            )
        elif p.fold:
            gemm_k.append(b.kernel([(ab + j, ib, wb + j * tk) for j in range(tn)]))
        else:
            gemm_k.append(
                b.kernel(
                    [
                        (ab + i * tn + j, ib + i * tk, wb + j * tk)
                        for i in range(tm)
                        for j in range(tn)
                    ]
                )
            )
    loops: dict[str, Any]
    if conv:
        # iter_out: the tile's channel blocks; iter_in: kw (vta.md §2.5 folding)
        loops = {
            "iter_out": tk,
            "iter_in": kw_n,
            "dst": (0, 0),
            "src": (in_th * in_tw, d),
            "wgt": (kh_n * kw_n, 1),
        }
        reset_k, reset_loops = alu_k, {}
    elif p.fold:
        loops = {"iter_out": tk, "iter_in": tm, "dst": (0, tn), "src": (1, tk), "wgt": (1, 0)}
        reset_k, reset_loops = gemm_k, {k: v for k, v in loops.items() if k != "iter_out"}
    else:
        loops = {"iter_out": tk, "dst": (0, 0), "src": (1, 0), "wgt": (1, 0)}
        reset_k, reset_loops = gemm_k, {k: v for k, v in loops.items() if k != "iter_out"}

    def load_a(t: int, bi: int, sp: tuple[int, ...], ko: int) -> None:
        if not conv:
            mo = sp[0]
            at = (mo * tm, ko * tk) if p.kind == KIND_GEMM else (bi, mo * tm, ko * tk)
            b.load(a_buf, sram_base=t * inp_tile, y_size=tm, x_size=tk, x_stride=kb, at=at)
            return
        ho, wo = sp
        r0, c0 = ho * th * s - p.pad, wo * tw * s - p.pad
        y_lo, x_lo = max(r0, 0), max(c0, 0)
        y_hi, x_hi = min(r0 + in_th, p.in_h), min(c0 + in_tw, p.in_w)
        pads = (y_lo - r0, r0 + in_th - y_hi, x_lo - c0, c0 + in_tw - x_hi)
        for c in range(tk):
            b.load(
                a_buf,
                sram_base=t * inp_tile + c * in_th * in_tw,
                y_size=y_hi - y_lo,
                x_size=x_hi - x_lo,
                x_stride=p.in_w,
                at=(ko * tk + c, y_lo, x_lo),
                pad=pads,
            )

    def load_w(t: int, bi: int, no: int, ko: int) -> None:
        j0 = (no * vt + t) * tn
        if conv:
            x, stride, at = tk * kh_n * kw_n, kb * kh_n * kw_n, (j0, ko * tk)
        else:
            x, stride = tk, kb
            at = (j0, ko * tk) if p.kind == KIND_GEMM else (bi, j0, ko * tk)
        b.load(w_buf, sram_base=t * wgt_tile, y_size=tn, x_size=x, x_stride=stride, at=at)

    def load_bias(t: int, no: int) -> None:
        assert bias_buf is not None
        j0 = (no * vt + t) * tn
        b.load(bias_buf, sram_base=t * acc_stride + acc_tile, y_size=1, x_size=tn, at=j0)

    def epilogue(t: int) -> None:
        for op, imm, src in p.epilogue:
            if src == SRC_BIAS:
                b.alu(AluOp(op), bias_k[t], iter_out=tm, dst=(tn, 0))
            else:
                b.alu(AluOp(op), alu_k[t], imm=imm)

    def store(t: int, q: int, bi: int, sp: tuple[int, ...], no: int) -> None:
        j0 = (no * vt + t) * tn
        if p.kind == KIND_GEMM:
            at: tuple[int, ...] = (q * mb + sp[0] * tm, j0)
            b.store(c_buf, sram_base=t * acc_stride, y_size=tm, x_size=tn, x_stride=nb, at=at)
        elif p.kind == KIND_BMM:
            at = (q, bi, sp[0] * tm, j0)
            b.store(c_buf, sram_base=t * acc_stride, y_size=tm, x_size=tn, x_stride=nb, at=at)
        elif tw == p.out_w:  # whole output rows: one 2-D store
            at = (q, 0, sp[0] * th, 0, j0)
            b.store(c_buf, sram_base=t * acc_stride, y_size=tm, x_size=tn, x_stride=nb, at=at)
        else:  # one store per output row of the tile
            for oh in range(th):
                at = (q, 0, sp[0] * th + oh, sp[1] * tw, j0)
                base = t * acc_stride + oh * tw * tn
                b.store(c_buf, sram_base=base, y_size=tw, x_size=tn, x_stride=nb, at=at)

    n_tiles = len(groups) * vt
    n_units = n_tiles * ko_n  # (tile, k tile) pairs, in program order
    unit = 0
    prev: tuple[int, tuple[int, ...], int] | None = None
    for gi, (bi, sp, no) in enumerate(groups):
        g = gi * vt
        keep_a = ko_n == 1 and prev is not None and prev[:2] == (bi, sp)
        keep_w = ko_n == 1 and prev is not None and (prev[0], prev[2]) == (bi, no)
        if p.bias and (prev is None or prev[2] != no):
            # the bias tile of each half (an ACC load on the compute engine, vta.md §2.2): the
            # store engine never reads it, and the ALU ADDs that read it ran earlier in order
            for t in range(vt):
                load_bias(t, no)
        for t in range(vt):
            if g + t >= vt:
                b.dep_pop(Engine.STORE, Engine.COMPUTE)  # this half's last store is out
            b.gemm(reset_k[t], reset=True, **reset_loops)
        for ko in range(ko_n):
            for t in range(vt):
                if unit + t >= vt:
                    b.dep_pop(Engine.COMPUTE, Engine.LOAD)  # the GEMM reading this half is done
                if not keep_a:
                    load_a(t, bi, sp, ko)
                if not keep_w:
                    load_w(t, bi, no, ko)
                b.dep_push(Engine.LOAD, Engine.COMPUTE)
            for t in range(vt):
                b.dep_pop(Engine.LOAD, Engine.COMPUTE)
                b.gemm(gemm_k[t], **loops)
                if unit + t + vt < n_units:
                    b.dep_push(Engine.COMPUTE, Engine.LOAD)
            unit += vt
        for q in range(planes):
            for t in range(vt):
                if q:
                    b.dep_pop(Engine.STORE, Engine.COMPUTE)  # plane q-1 of this half is out
                    b.alu(AluOp.SHR, alu_k[t], imm=8)
                else:
                    epilogue(t)
                b.dep_push(Engine.COMPUTE, Engine.STORE)
            for t in range(vt):
                b.dep_pop(Engine.COMPUTE, Engine.STORE)
                store(t, q, bi, sp, no)
                if q < planes - 1 or g + t + vt < n_tiles:
                    b.dep_push(Engine.STORE, Engine.COMPUTE)
        prev = (bi, sp, no)
    return b.finish()


def pack_inputs(x: np.ndarray, w: np.ndarray, config: VTAConfig | None = None) -> dict:
    """The logical int8 operands as the program's ``A`` and ``W`` DRAM buffers; the compute is
    read from the ranks: ``X (M, K)``, ``W (N, K)`` (GEMM); ``X (B, M, K)``, ``W (B, N, K)``
    (BMM); ``X (1, H, W, CI)``, ``W (CO, KH, KW, CI)`` (C2D, ``heronlike.ops.c2d``'s NHWC) or
    ``W (CO/16, KH, KW, CI/16, 16, 16)`` (the weight layout the VTA rules pre-pack,
    ``Space.packed``).

    Raises:
        VTAProgramError: ranks of no supported compute.
    """
    cfg = config or VTAConfig()
    x, w = np.asarray(x, np.int8), np.asarray(w, np.int8)
    bi, bo = cfg.block_in, cfg.block_out
    if x.ndim == 2 and w.ndim == 2:
        return pack_gemm_operands(x, w, cfg)
    if x.ndim == 3 and w.ndim == 3:
        packed = [pack_gemm_operands(x[i], w[i], cfg) for i in range(x.shape[0])]
        return {k: np.ascontiguousarray(np.stack([pk[k] for pk in packed])) for k in ("A", "W")}
    if x.ndim == 4 and w.ndim == 6 and x.shape[0] == 1:  # W pre-packed by the rules' layout
        cob, kh, kw, cib, bo_, bi_ = w.shape
        w = w.transpose(0, 4, 1, 2, 3, 5).reshape(cob * bo_, kh, kw, cib * bi_)
    if x.ndim == 4 and w.ndim == 4 and x.shape[0] == 1:
        _, h, wd, ci = x.shape
        co, kh, kw, _ = w.shape
        a = x[0].reshape(h, wd, ci // bi, 1, bi).transpose(2, 0, 1, 3, 4)
        wt = w.reshape(co // bo, bo, kh, kw, ci // bi, bi).transpose(0, 4, 2, 3, 1, 5)
        return {"A": np.ascontiguousarray(a), "W": np.ascontiguousarray(wt)}
    raise VTAProgramError(f"no VTA compute has operands of shapes {x.shape} and {w.shape}")


def pack_bias(bias: np.ndarray, config: VTAConfig | None = None) -> np.ndarray:
    """A per-output-channel int32 ``bias (N,)`` as the program's ``bias`` buffer
    ``(N/BLOCK_OUT, BATCH, BLOCK_OUT)`` (every BATCH row the same).

    Raises:
        VTAProgramError: ``bias`` is not one-dimensional or BLOCK_OUT does not divide it.
    """
    cfg = config or VTAConfig()
    bias = np.asarray(bias, np.int32)
    if bias.ndim != 1 or bias.shape[0] % cfg.block_out:
        raise VTAProgramError(f"a bias is (N,) with N a multiple of 16, not {bias.shape}")
    tiles = bias.reshape(-1, 1, cfg.block_out)
    return np.ascontiguousarray(np.broadcast_to(tiles, (tiles.shape[0], cfg.batch, cfg.block_out)))


def unpack_output(c: np.ndarray, planes: int = PLANES) -> np.ndarray:
    """The program's ``C`` buffer as the logical result: ``(M, N)`` (GEMM, rank 4),
    ``(B, M, N)`` (BMM, rank 6) or ``(1, HO, WO, CO)`` (C2D, rank 7); with ``planes`` = 4
    (``GemmParams.planes`` of an int32 result) the four byte planes joined into int32, with 1
    (an int8 epilogue) the int8 bytes as they are.

    Raises:
        VTAProgramError: a shape no VTA compute writes, ``planes`` not 1 or 4.
    """
    c = np.asarray(c)
    if planes not in (1, PLANES):
        raise VTAProgramError(f"a C buffer holds 1 or {PLANES} byte planes, not {planes}")
    if c.ndim == 4:
        split = c.reshape(planes, c.shape[0] // planes, *c.shape[1:])
        logical = [unpack_gemm_output(split[q]) for q in range(planes)]
    elif c.ndim == 6:
        logical = [
            np.stack([unpack_gemm_output(c[q, i]) for i in range(c.shape[1])])
            for q in range(planes)
        ]
    elif c.ndim == 7:
        _, n, ho, wo, nb, bt, bo = c.shape
        logical = [c[q].reshape(n, ho, wo, nb * bt * bo) for q in range(planes)]
    else:
        raise VTAProgramError(f"no VTA compute writes a C buffer of shape {c.shape}")
    if planes == 1:
        return np.ascontiguousarray(logical[0]).view(np.int8)
    out = np.zeros(logical[0].shape, np.uint32)
    for q in range(planes):
        out |= logical[q].view(np.uint8).astype(np.uint32) << np.uint32(8 * q)
    return out.view(np.int32)


def unpack_int32_output(c: np.ndarray) -> np.ndarray:
    """The program's ``C`` buffer (four int8 byte planes) as the int32 result
    (:func:`unpack_output` with 4 planes)."""
    return unpack_output(c, PLANES)


def build_vta(
    mod_json: str, target: dict[str, Any], path: str, options: dict[str, Any]
) -> tuple[str | None, str | None, str | None, dict[str, Any]]:
    """The VTA build function (:data:`heronlike.measure.BuildFunction`).

    Generates the program from ``options["assignment"]`` (the candidate's CSP assignment) under
    ``options["vta_config"]`` (``vta_config.json`` text) and pickles ``{"format", "config",
    "params", "program"}`` to ``path``. ``mod_json`` (the scheduled TIR) and ``target`` are not
    read. Failures are returned as ``"build"`` errors, never raised.
    """
    from heronlike.measure.kinds import ErrorKind
    from heronlike.measure.runner import short_error

    try:
        config = VTAConfig.from_json(_json(options.get("vta_config")))
        params = GemmParams.from_assignment(options.get("assignment") or {})
        program = gemm_int32_program(params, config)
        with open(path, "wb") as f:
            pickle.dump(
                {
                    "format": ARTIFACT_FORMAT,
                    "config": config,
                    "params": params,
                    "program": program,
                },
                f,
            )
        info = {
            "instructions": len(program.instructions),
            "uops": int(len(program.uops)),
            "params": asdict(params),
        }
        return path, None, None, info
    except Exception as exc:  # noqa: BLE001 - failures are data
        return None, ErrorKind.BUILD, short_error(exc), {}


def _json(text: Any) -> dict[str, Any]:
    import json

    if not text:
        return {}
    return dict(json.loads(text)) if isinstance(text, str) else dict(text)


def load_artifact(path: str) -> tuple[Program, GemmParams]:
    """The program and parameters a :func:`build_vta` artifact holds.

    Raises:
        VTAProgramError: the file is not such an artifact.
    """
    with open(path, "rb") as f:
        data = pickle.load(f)  # noqa: S301 - our own builder's file
    if not isinstance(data, dict) or data.get("format") != ARTIFACT_FORMAT:
        raise VTAProgramError(f"{path} is not a VTA program artifact ({ARTIFACT_FORMAT})")
    return data["program"], data["params"]
