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

**Generation as arrays.** The group body runs once per distinct (group class, builder state)
to record a template, and once more per template with the indices of all its groups as arrays;
the program's columns are then filled from the templates (:func:`gemm_int32_program`), so a
program of 10⁶ instructions is generated in well under a second.

**The artifact** (:func:`save_artifact`, :func:`load_artifact`, format
:data:`ARTIFACT_FORMAT`) is one uncompressed ``.npz``: the instruction stream as 128-bit
encodings (an ``(n, 2)`` uint64 array, 16 bytes per instruction), the micro-op table, and JSON
metadata (config, parameters, DRAM buffers). Loading decodes it into columns in one
vectorised pass (:func:`~.table.decode_table`); no Python object per instruction is made
unless :attr:`~.program.Program.instructions` is asked for. Pickled artifacts of the previous
format (``heronlike-vta-program/1``) are still read.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from heronlike.errors import VTAProgramError
from heronlike.rules.vta import PARAMS, SRC_BIAS, SRC_IMM

from .builder import ProgramBuilder, Segment, State
from .config import VTAConfig
from .examples import pack_gemm_operands, unpack_gemm_output
from .isa import AluOp, Engine
from .program import DramBuffer, Program
from .table import FIELDS, InsnTable, decode_table, field_dtypes

#: bytes of an int32 accumulator leaving VTA through 8-bit stores
PLANES = 4
#: format tag of the artifact the build function writes (:func:`save_artifact`)
ARTIFACT_FORMAT = "heronlike-vta-program/2"
#: the format before it (a pickle of instruction objects), still read by :func:`load_artifact`
_PICKLED_FORMAT = "heronlike-vta-program/1"
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

    Generation (:class:`_Lowering`): the instructions of a group of output tiles depend on the
    group's indices only through DRAM addresses (and, for C2D, the padding of border tiles);
    their token flags and micro-op loads depend only on the group's class (first, last, operand
    tiles kept, bias reloaded) and the builder's state (:meth:`.ProgramBuilder.state`). So the
    group body runs once per distinct (class, state) to record its structure, and once more per
    such template with every group's indices as arrays; the program's columns are then filled
    in one pass. The result is the program the group-by-group loop (:meth:`_Lowering.scalar`,
    ``_FAST = False``) builds, instruction for instruction (``tests/test_vta_artifact.py``); a
    program of 10⁶ instructions takes a fraction of a second, not half a minute.

    Raises:
        VTAProgramError: tiles that do not divide the extents, ``vthreads`` not in {1, 2} or
            not dividing the column tiles, C2D padding wider than the kernel window, an
            epilogue operation VTA's ALU lacks; the simulator's checks raise the rest (buffer
            overflow, fields, immediates, hazards).
    """
    cfg = config or VTAConfig()
    _check_tiling(p)
    low = _Lowering(p, cfg)
    if not _FAST or low.n_groups < _FAST_MIN_GROUPS:
        return low.scalar()
    try:
        program = low.fast()
    except (VTAProgramError, _Mismatch):
        # the first error in program order (or a structure the templates do not reproduce):
        # the group-by-group loop raises or builds exactly what it always did
        return _Lowering(p, cfg).scalar()
    program.validate()
    return program


#: generate programs from group templates (False: group by group, the reference)
_FAST = True
#: fewer groups than this are generated group by group (the templates would not pay)
_FAST_MIN_GROUPS = 4


class _Mismatch(Exception):
    """A template's array pass did not reproduce its scalar pass (a bug: fall back)."""


class _Lowering:
    """The program skeleton of :func:`gemm_int32_program` for one candidate: DRAM buffers,
    micro-op kernels, the groups of output tiles and the instructions of each group."""

    def __init__(self, p: GemmParams, cfg: VTAConfig) -> None:
        self.p, self.cfg = p, cfg
        mb, nb, kb = p.m_blocks, p.n_blocks, p.k_blocks
        tm, tn, tk, vt = p.tile_m, p.tile_n, p.tile_k, p.vthreads
        self.conv = conv = p.kind == KIND_C2D
        no_n = nb // (tn * vt)
        self.no_n, self.ko_n = no_n, kb // tk
        if conv:
            th, tw, s, d = p.tile_h, p.tile_w, p.stride, p.dilation
            kh_n, kw_n = p.kernel_h, p.kernel_w
            in_th, in_tw = p.in_tile_h, p.in_tile_w
            n_wo = p.out_w // tw
            n_sp = p.out_h // th * n_wo
            self.inp_tile, self.wgt_tile = tk * in_th * in_tw, tn * tk * kh_n * kw_n
        else:
            n_wo, n_sp = 0, mb // tm
            self.inp_tile, self.wgt_tile = tm * tk, tn * tk
        self.acc_tile = acc_tile = tm * tn
        # each thread's accumulator half: its output tile, then (with a bias) the bias tile
        self.acc_stride = acc_stride = acc_tile + (tn if p.bias else 0)
        # the groups of output tiles in program order, as arrays: batch, spatial tile, columns
        n_b = p.batch if p.kind == KIND_BMM else 1
        self.n_groups = n_g = n_b * n_sp * no_n
        self.g_bi = np.repeat(np.arange(n_b, dtype=np.int64), n_sp * no_n)
        if p.order == 0:  # spatial tiles outer, column tiles inner
            sp_idx = np.tile(np.repeat(np.arange(n_sp, dtype=np.int64), no_n), n_b)
            self.g_no = np.tile(np.arange(no_n, dtype=np.int64), n_b * n_sp)
        else:
            sp_idx = np.tile(np.arange(n_sp, dtype=np.int64), n_b * no_n)
            self.g_no = np.tile(np.repeat(np.arange(no_n, dtype=np.int64), n_sp), n_b)
        # spatial tile: (mo,) for GEMM/BMM, (ho, wo) for C2D
        self.g_sp = (sp_idx // n_wo, sp_idx % n_wo) if conv else (sp_idx,)
        assert len(self.g_no) == n_g

        self.b = b = ProgramBuilder(cfg)
        inp_e, wgt_e, out_e = cfg.elem_shape("INP"), cfg.elem_shape("WGT"), cfg.elem_shape("OUT")
        planes = p.planes
        if p.kind == KIND_GEMM:
            self.a_buf = b.alloc("A", "INP", (mb, kb, *inp_e))
            self.w_buf = b.alloc("W", "WGT", (nb, kb, *wgt_e))
            self.c_buf = b.alloc("C", "OUT", (planes * mb, nb, *out_e))
        elif p.kind == KIND_BMM:
            self.a_buf = b.alloc("A", "INP", (p.batch, mb, kb, *inp_e))
            self.w_buf = b.alloc("W", "WGT", (p.batch, nb, kb, *wgt_e))
            self.c_buf = b.alloc("C", "OUT", (planes, p.batch, mb, nb, *out_e))
        else:
            self.a_buf = b.alloc("A", "INP", (kb, p.in_h, p.in_w, *inp_e))
            self.w_buf = b.alloc("W", "WGT", (nb, kb, kh_n, kw_n, *wgt_e))
            self.c_buf = b.alloc("C", "OUT", (planes, 1, p.out_h, p.out_w, nb, *out_e))
        self.bias_buf = b.alloc("bias", "ACC", (nb, *cfg.elem_shape("ACC"))) if p.bias else None

        self.gemm_k, self.alu_k, self.bias_k = gemm_k, alu_k, bias_k = [], [], []
        for t in range(vt):
            ib, wb, ab = t * self.inp_tile, t * self.wgt_tile, t * acc_stride
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
        self.loops: dict[str, Any]
        if conv:
            # iter_out: the tile's channel blocks; iter_in: kw (vta.md §2.5 folding)
            self.loops = {
                "iter_out": tk,
                "iter_in": kw_n,
                "dst": (0, 0),
                "src": (in_th * in_tw, d),
                "wgt": (kh_n * kw_n, 1),
            }
            self.reset_k, self.reset_loops = alu_k, {}
        elif p.fold:
            self.loops = {
                "iter_out": tk,
                "iter_in": tm,
                "dst": (0, tn),
                "src": (1, tk),
                "wgt": (1, 0),
            }
            self.reset_k = gemm_k
            self.reset_loops = {k: v for k, v in self.loops.items() if k != "iter_out"}
        else:
            self.loops = {"iter_out": tk, "dst": (0, 0), "src": (1, 0), "wgt": (1, 0)}
            self.reset_k = gemm_k
            self.reset_loops = {k: v for k, v in self.loops.items() if k != "iter_out"}

    # -- the groups --------------------------------------------------------------------------
    def classes(self) -> np.ndarray:
        """Each group's class (int): bit 0 first group, 1 last group, 2 input tile kept (K in
        one tile and the previous group had the same rows), 3 weight tile kept (same columns),
        4 bias tile loaded (a bias and the previous group had other columns)."""
        n = self.n_groups
        bi, sp, no = self.g_bi, self.g_sp, self.g_no
        same = np.zeros(n, bool)
        same[1:] = bi[1:] == bi[:-1]
        same_sp = same.copy()
        for a in sp:
            same_sp[1:] &= a[1:] == a[:-1]
        same_no = same.copy()
        same_no[1:] &= no[1:] == no[:-1]
        bias = np.full(n, bool(self.p.bias))
        bias[1:] &= no[1:] != no[:-1]
        one_k = self.ko_n == 1
        code = (np.arange(n) == 0).astype(np.int64)
        code |= (np.arange(n) == n - 1) << 1
        code |= (same_sp & one_k) << 2
        code |= (same_no & one_k) << 3
        code |= bias.astype(np.int64) << 4
        return code

    def group_arrays(
        self, idx: np.ndarray
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
        """(batch, spatial tile indices, column tile) of the groups ``idx``, as int64 arrays."""
        return self.g_bi[idx], tuple(a[idx] for a in self.g_sp), self.g_no[idx]

    def group(self, gi: int) -> tuple[int, tuple[int, ...], int]:
        """(batch, spatial tile indices, column tile) of group ``gi``, as ints."""
        return int(self.g_bi[gi]), tuple(int(a[gi]) for a in self.g_sp), int(self.g_no[gi])

    def emit_group(self, code: int, bi: Any, sp: tuple[Any, ...], no: Any) -> None:
        """The instructions of one group of class ``code`` (:meth:`classes`), or of many groups
        of that class at once when ``bi``, ``sp`` and ``no`` are arrays (each address field of
        a row is then an array)."""
        p, b, vt = self.p, self.b, self.p.vthreads
        first, last = code & 1, code & 2
        keep_a, keep_w, load_bias = code & 4, code & 8, code & 16
        ko_n = self.ko_n
        if load_bias:
            # the bias tile of each half (an ACC load on the compute engine, vta.md §2.2): the
            # store engine never reads it, and the ALU ADDs that read it ran earlier in order
            for t in range(vt):
                self.load_bias(t, no)
        for t in range(vt):
            if not first:
                b.dep_pop(Engine.STORE, Engine.COMPUTE)  # this half's last store is out
            b.gemm(self.reset_k[t], reset=True, **self.reset_loops)
        for ko in range(ko_n):
            for t in range(vt):
                if not (first and ko == 0):
                    b.dep_pop(Engine.COMPUTE, Engine.LOAD)  # the GEMM reading this half is done
                if not keep_a:
                    self.load_a(t, bi, sp, ko)
                if not keep_w:
                    self.load_w(t, bi, no, ko)
                b.dep_push(Engine.LOAD, Engine.COMPUTE)
            for t in range(vt):
                b.dep_pop(Engine.LOAD, Engine.COMPUTE)
                b.gemm(self.gemm_k[t], **self.loops)
                if not (last and ko == ko_n - 1):
                    b.dep_push(Engine.COMPUTE, Engine.LOAD)
        for q in range(p.planes):
            for t in range(vt):
                if q:
                    b.dep_pop(Engine.STORE, Engine.COMPUTE)  # plane q-1 of this half is out
                    b.alu(AluOp.SHR, self.alu_k[t], imm=8)
                else:
                    self.epilogue(t)
                b.dep_push(Engine.COMPUTE, Engine.STORE)
            for t in range(vt):
                b.dep_pop(Engine.COMPUTE, Engine.STORE)
                self.store(t, q, bi, sp, no)
                if q < p.planes - 1 or not last:
                    b.dep_push(Engine.STORE, Engine.COMPUTE)

    def load_a(self, t: int, bi: Any, sp: tuple[Any, ...], ko: int) -> None:
        p, b, tk = self.p, self.b, self.p.tile_k
        if not self.conv:
            mo = sp[0]
            at = (mo * p.tile_m, ko * tk) if p.kind == KIND_GEMM else (bi, mo * p.tile_m, ko * tk)
            b.load(
                self.a_buf,
                sram_base=t * self.inp_tile,
                y_size=p.tile_m,
                x_size=tk,
                x_stride=p.k_blocks,
                at=at,
            )
            return
        ho, wo = sp
        in_th, in_tw = p.in_tile_h, p.in_tile_w
        r0, c0 = ho * p.tile_h * p.stride - p.pad, wo * p.tile_w * p.stride - p.pad
        y_lo, x_lo = np.maximum(r0, 0), np.maximum(c0, 0)
        y_hi, x_hi = np.minimum(r0 + in_th, p.in_h), np.minimum(c0 + in_tw, p.in_w)
        pads = (y_lo - r0, r0 + in_th - y_hi, x_lo - c0, c0 + in_tw - x_hi)
        for c in range(tk):
            b.load(
                self.a_buf,
                sram_base=t * self.inp_tile + c * in_th * in_tw,
                y_size=y_hi - y_lo,
                x_size=x_hi - x_lo,
                x_stride=p.in_w,
                at=(ko * tk + c, y_lo, x_lo),
                pad=pads,
            )

    def load_w(self, t: int, bi: Any, no: Any, ko: int) -> None:
        p = self.p
        tn, tk, kb = p.tile_n, p.tile_k, p.k_blocks
        j0 = (no * p.vthreads + t) * tn
        if self.conv:
            taps = p.kernel_h * p.kernel_w
            x, stride, at = tk * taps, kb * taps, (j0, ko * tk)
        else:
            x, stride = tk, kb
            at = (j0, ko * tk) if p.kind == KIND_GEMM else (bi, j0, ko * tk)
        self.b.load(
            self.w_buf, sram_base=t * self.wgt_tile, y_size=tn, x_size=x, x_stride=stride, at=at
        )

    def load_bias(self, t: int, no: Any) -> None:
        assert self.bias_buf is not None
        tn = self.p.tile_n
        j0 = (no * self.p.vthreads + t) * tn
        base = t * self.acc_stride + self.acc_tile
        self.b.load(self.bias_buf, sram_base=base, y_size=1, x_size=tn, at=j0)

    def epilogue(self, t: int) -> None:
        for op, imm, src in self.p.epilogue:
            if src == SRC_BIAS:
                tm, tn = self.p.tile_m, self.p.tile_n
                self.b.alu(AluOp(op), self.bias_k[t], iter_out=tm, dst=(tn, 0))
            else:
                self.b.alu(AluOp(op), self.alu_k[t], imm=imm)

    def store(self, t: int, q: int, bi: Any, sp: tuple[Any, ...], no: Any) -> None:
        p, b = self.p, self.b
        tm, tn, nb = p.tile_m, p.tile_n, p.n_blocks
        j0 = (no * p.vthreads + t) * tn
        base = t * self.acc_stride
        if p.kind == KIND_GEMM:
            at: tuple[Any, ...] = (q * p.m_blocks + sp[0] * tm, j0)
            b.store(self.c_buf, sram_base=base, y_size=tm, x_size=tn, x_stride=nb, at=at)
        elif p.kind == KIND_BMM:
            at = (q, bi, sp[0] * tm, j0)
            b.store(self.c_buf, sram_base=base, y_size=tm, x_size=tn, x_stride=nb, at=at)
        elif p.tile_w == p.out_w:  # whole output rows: one 2-D store
            at = (q, 0, sp[0] * p.tile_h, 0, j0)
            b.store(self.c_buf, sram_base=base, y_size=tm, x_size=tn, x_stride=nb, at=at)
        else:  # one store per output row of the tile
            tw = p.tile_w
            for oh in range(p.tile_h):
                at = (q, 0, sp[0] * p.tile_h + oh, sp[1] * tw, j0)
                row_base = base + oh * tw * tn
                b.store(self.c_buf, sram_base=row_base, y_size=tw, x_size=tn, x_stride=nb, at=at)

    # -- the two generators ----------------------------------------------------------------------
    def scalar(self) -> Program:
        """The program, group by group (the reference generator)."""
        bi, no = self.g_bi.tolist(), self.g_no.tolist()
        sp = list(zip(*(a.tolist() for a in self.g_sp), strict=True))
        for gi, code in enumerate(self.classes().tolist()):
            self.emit_group(code, bi[gi], sp[gi], no[gi])
        return self.b.finish()

    def fast(self) -> Program:
        """The program from group templates (see :func:`gemm_int32_program`), not validated.

        Raises:
            VTAProgramError: an address outside its buffer (the caller re-runs :meth:`scalar`
                for the error of the first such instruction in program order).
            _Mismatch: a template's array pass differs from its scalar pass.
        """
        b = self.b
        codes = self.classes()
        n_g = self.n_groups
        ids: dict[State, int] = {}
        states: list[State] = []

        def state_id() -> int:
            st = b.state()
            found = ids.get(st)
            if found is None:
                found = ids[st] = len(states)
                states.append(st)
            return found

        # pass 1: the structure of each (class, state in) template and the state it leaves;
        # within a run of groups of one class, once a template leaves the state it started
        # from, the rest of the run repeats it
        s = state_id()
        memo: dict[tuple[int, int], tuple[int, int]] = {}
        tmpl: list[tuple[int, int, Segment]] = []
        group_t = np.empty(n_g, np.int64)
        run_starts = np.flatnonzero(np.diff(codes, prepend=-1) != 0).tolist() + [n_g]
        for g0, g1 in zip(run_starts[:-1], run_starts[1:], strict=True):
            code = int(codes[g0])
            for gi in range(g0, g1):
                hit = memo.get((code, s))
                if hit is None:
                    b.restore(states[s])
                    self.emit_group(code, *self.group(gi))
                    seg = b.segment()
                    hit = memo[(code, s)] = (len(tmpl), state_id())
                    tmpl.append((code, s, seg))
                tid, s_next = hit
                if s_next == s:
                    group_t[gi:g1] = tid
                    break
                group_t[gi], s = tid, s_next
        b.restore(states[s])
        b.close(sync=True)
        suffix = b.segment()

        # pass 2: every group of a template at once, addresses as arrays
        filled: list[tuple[Segment, np.ndarray]] = []  # (segment, positions of its rows)
        lengths = np.array([len(seg.rows) for _, _, seg in tmpl], np.int64)
        starts = np.zeros(n_g + 1, np.int64)
        np.cumsum(lengths[group_t], out=starts[1:])
        for tid, (code, s_in, seg) in enumerate(tmpl):
            idx = np.flatnonzero(group_t == tid)
            b.restore(states[s_in])
            self.emit_group(code, *self.group_arrays(idx))
            seg2 = b.segment()
            _same_structure(seg, seg2)
            pos = starts[idx][:, None] + np.arange(len(seg.rows), dtype=np.int64)
            filled.append((seg2, pos))

        # assemble the columns: each instruction is a row of a template (or of the suffix); a
        # column is a gather of each row's scalar value, then the rows whose value is an array
        # (addresses, C2D border sizes and pads) are scattered, then the patched flags set
        ubase = b.uop_buffer().elem_base
        n = int(starts[-1]) + len(suffix.rows)
        tail = int(starts[-1]) + np.arange(len(suffix.rows), dtype=np.int64)
        parts = [(seg2, pos) for seg2, pos in filled] + [(suffix, tail[None, :])]
        bases = np.cumsum([0] + [len(seg.rows) for seg, _ in parts])
        rowid = np.empty(n, np.int32)
        for (_, pos), base in zip(parts, bases[:-1].tolist(), strict=True):
            rowid[pos] = base + np.arange(pos.shape[1], dtype=np.int32)
        dtypes = field_dtypes(self.cfg)
        cols: dict[str, np.ndarray] = {}
        for i, name in enumerate(FIELDS):
            lut = np.zeros(int(bases[-1]), np.int64)
            scattered: list[tuple[np.ndarray, np.ndarray]] = []
            for (seg, pos), base in zip(parts, bases[:-1].tolist(), strict=True):
                for r, row in enumerate(seg.rows):
                    v = row[i]
                    if isinstance(v, np.ndarray):
                        scattered.append((pos[:, r], v))
                    else:
                        lut[base + r] = v
                if name == "dram_base":
                    for r, off in seg.uop_fixups:
                        lut[base + r] = ubase + off
            patched = [(pos[:, 0] - 1, seg.patch[name]) for seg, pos in parts if name in seg.patch]
            lo, hi = int(lut.min()), int(lut.max())
            for _, v in scattered:
                lo, hi = min(lo, int(v.min())), max(hi, int(v.max()))
            for _, v in patched:
                lo, hi = min(lo, v), max(hi, v)
            info = np.iinfo(dtypes[name])
            dt = dtypes[name] if info.min <= lo and hi <= info.max else np.dtype(np.int64)
            if lo == hi and not scattered:  # one value everywhere (often 0)
                cols[name] = np.full(n, lo, dt)
                continue
            col = lut.astype(dt)[rowid]
            for idx, v in scattered:
                col[idx] = v
            for idx, v in patched:  # never on the first group: it has no row before it
                col[idx] = v
            cols[name] = col
        return Program(
            self.cfg, None, dict(b.buffers), b.uop_table(), b._top, table=InsnTable(cols)
        )


def _same_structure(seg: Segment, seg2: Segment) -> None:
    """Raise :class:`_Mismatch` unless ``seg2`` (array pass) has ``seg``'s rows (scalar pass of
    its first group) with the first group's values, the same patch and micro-op loads."""
    if len(seg.rows) != len(seg2.rows) or seg.patch != seg2.patch:
        raise _Mismatch("row count or patch")
    if seg.uop_fixups != seg2.uop_fixups:
        raise _Mismatch("micro-op loads")
    for r1, r2 in zip(seg.rows, seg2.rows, strict=True):
        for v1, v2 in zip(r1, r2, strict=True):
            if isinstance(v2, np.ndarray):
                if v2.size == 0 or int(v2[0]) != int(v1):
                    raise _Mismatch("values")
            elif int(v1) != int(v2):
                raise _Mismatch("values")


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
    ``options["vta_config"]`` (``vta_config.json`` text) and writes it to ``path`` as a
    columnar artifact (:func:`save_artifact`). ``mod_json`` (the scheduled TIR) and ``target``
    are not read. Failures are returned as ``"build"`` errors, never raised.
    """
    from heronlike.measure.kinds import ErrorKind
    from heronlike.measure.runner import short_error

    try:
        config = VTAConfig.from_json(_json(options.get("vta_config")))
        params = GemmParams.from_assignment(options.get("assignment") or {})
        program = gemm_int32_program(params, config)
        save_artifact(path, program, params)
        info = {
            "instructions": program.n_instructions,
            "uops": int(len(program.uops)),
            "params": asdict(params),
        }
        return path, None, None, info
    except Exception as exc:  # noqa: BLE001 - failures are data
        return None, ErrorKind.BUILD, short_error(exc), {}


def _json(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    return dict(json.loads(text)) if isinstance(text, str) else dict(text)


def save_artifact(path: str | Path, program: Program, params: GemmParams) -> None:
    """Write ``program`` (validated) and ``params`` to ``path`` in the artifact format
    :data:`ARTIFACT_FORMAT`: one uncompressed ``.npz`` (whatever ``path`` ends with) holding

    * ``format``: the format tag, a 0-d unicode array;
    * ``meta``: JSON text (a 0-d unicode array) of the config (``vta_config.json`` keys), the
      parameters (:class:`GemmParams` fields, the epilogue as lists), the DRAM buffers (name,
      kind, byte address, shape, dtype, element bytes) and the DRAM image size in bytes;
    * ``insns``: the instruction stream, an ``(n, 2)`` uint64 array of each instruction's
      128-bit encoding (:func:`~.encoding.encode`) as (low, high) 64-bit halves, 16 bytes per
      instruction;
    * ``uops``: the micro-op table, an ``(k, 3)`` int64 array of (dst, src, wgt) indices.

    Raises:
        VTAProgramError, VTAFieldError: ``program`` does not validate.
        OSError: ``path`` cannot be written.
    """
    program.validate()
    meta = {
        "config": json.loads(program.config.to_json()),
        "params": asdict(params),
        "buffers": [
            [b.name, b.kind, b.addr, list(b.shape), np.dtype(b.dtype).str, b.elem_bytes]
            for b in program.buffers.values()
        ],
        "dram_bytes": program.dram_bytes,
    }
    with open(path, "wb") as f:  # a file object: np.savez would append ".npz" to a name
        np.savez(
            f,
            format=np.array(ARTIFACT_FORMAT),
            meta=np.array(json.dumps(meta)),
            insns=program.encoded_words(),
            uops=np.asarray(program.uops, np.int64).reshape(-1, 3),
        )


def load_artifact(path: str | Path) -> tuple[Program, GemmParams]:
    """The program and parameters a :func:`build_vta` artifact holds (:func:`save_artifact`'s
    format; the pickled artifacts of format ``heronlike-vta-program/1`` are read too). The
    program comes back as columns, already validated (its builder validated it); about 0.1 µs
    per instruction, against 8 µs for the pickled objects of format 1.

    Raises:
        VTAProgramError: the file is not such an artifact, has another format tag, or holds an
            instruction word that does not decode.
    """
    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        if magic[:1] == b"\x80":  # a pickle: format 1
            return _load_pickled(f, str(path))
        if magic != b"PK\x03\x04":
            raise VTAProgramError(f"{path} is not a VTA program artifact ({ARTIFACT_FORMAT})")
        try:
            with np.load(f, allow_pickle=False) as data:
                tag = str(data["format"]) if "format" in data.files else None
                if tag != ARTIFACT_FORMAT:
                    raise VTAProgramError(
                        f"{path}: VTA program artifact format {tag!r}, this heronlike reads "
                        f"{ARTIFACT_FORMAT!r} (rebuild the candidate)"
                    )
                meta = json.loads(str(data["meta"]))
                words, uops = data["insns"], data["uops"]
        except (ValueError, KeyError, OSError) as exc:
            raise VTAProgramError(f"{path} is not a readable VTA program artifact: {exc}") from None
    config = VTAConfig.from_json(meta["config"])
    pm = dict(meta["params"])
    pm["epilogue"] = tuple(tuple(int(v) for v in op) for op in pm.get("epilogue", ()))
    params = GemmParams(**pm)
    buffers = {
        name: DramBuffer(name, kind, int(addr), tuple(shape), np.dtype(dt), int(eb))
        for name, kind, addr, shape, dt, eb in meta["buffers"]
    }
    table = decode_table(words, config).narrowed(config)
    program = Program(config, None, buffers, uops, int(meta["dram_bytes"]), table=table)
    program.mark_validated()
    return program, params


def _load_pickled(f: BinaryIO, path: str) -> tuple[Program, GemmParams]:
    """A format-1 artifact: a pickled ``{"format", "config", "params", "program"}``."""
    try:
        data = pickle.load(f)  # noqa: S301 - our own builder's file
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not ours"
        raise VTAProgramError(f"{path} is not a readable VTA program artifact: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != _PICKLED_FORMAT:
        raise VTAProgramError(f"{path} is not a VTA program artifact ({ARTIFACT_FORMAT})")
    return data["program"], data["params"]
