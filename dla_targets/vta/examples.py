"""Hand-written reference programs (for tests, benchmarks and as a worked example of token
placement). This is not the schedule lowering: it fixes one loop order, as AutoTVM's dense
template did (vta.md §3), and takes its tile sizes as arguments.

Layouts (vta.md §2.4, dense): ``A (M/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN)`` int8,
``W (N/BLOCK_OUT, K/BLOCK_IN, BLOCK_OUT, BLOCK_IN)`` int8, ``C (M/BATCH, N/BLOCK_OUT, BATCH,
BLOCK_OUT)`` int8, optional ``bias (N/BLOCK_OUT, BATCH, BLOCK_OUT)`` int32.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heronlike.errors import VTAProgramError

from .builder import ProgramBuilder
from .config import VTAConfig
from .isa import AluOp, Engine
from .program import Program

#: the standard VTA requantisation epilogue without bias: SHR 8, MIN 127, MAX 0 (vta.md §2.4)
DEFAULT_EPILOGUE: tuple[tuple[AluOp, int], ...] = ((AluOp.SHR, 8), (AluOp.MIN, 127), (AluOp.MAX, 0))


def gemm_program(
    m: int,
    n: int,
    k: int,
    *,
    tile_m: int,
    tile_n: int,
    tile_k: int,
    vthreads: int = 1,
    epilogue: Sequence[tuple[AluOp, int]] = DEFAULT_EPILOGUE,
    bias: bool = False,
    fold_m: bool = False,
    config: VTAConfig | None = None,
) -> Program:
    """A blocked GEMM ``C = epilogue(A @ W.T [+ bias])`` for VTA.

    Args:
        m, n, k: the GEMM extents (multiples of BATCH, BLOCK_OUT and BLOCK_IN).
        tile_m: output rows per tile, in BATCH rows; tile_n, tile_k: blocks of BLOCK_OUT and
            BLOCK_IN per tile.
        vthreads: 1 or 2 virtual threads: output tiles alternate between two SRAM halves so one
            thread's loads overlap the other's GEMM (vta.md §2.5). The number of output tiles
            must be a multiple of it.
        epilogue: ALU ops with immediates applied after the optional bias add, in order.
        bias: add an int32 ``bias`` (ACC load on the compute engine, ALU ADD).
        fold_m: fold the tile's rows into the GEMM's inner loop (``tile_n`` micro-ops,
            ``iter_in = tile_m``) instead of unrolling rows and columns into ``tile_m·tile_n``
            micro-ops; more loop re-entries, fewer micro-ops.

    Loop order: output tiles (rows, then columns), then k tiles; loads at each k tile, GEMM
    innermost over the tile's outputs, so an accumulator address repeats every
    ``tile_m·tile_n`` micro-ops (≥ 3 or the simulator reports the hazard).

    Raises:
        VTAProgramError: extents not divisible by the tiles, tiles not divisible by vthreads.
    """
    cfg = config or VTAConfig()
    mb, nb, kb = m // cfg.batch, n // cfg.block_out, k // cfg.block_in
    if (mb * cfg.batch, nb * cfg.block_out, kb * cfg.block_in) != (m, n, k):
        raise VTAProgramError(
            f"GEMM {m}×{n}×{k} is not a multiple of the intrinsic "
            f"{cfg.batch}×{cfg.block_out}×{cfg.block_in}"
        )
    if mb % tile_m or nb % tile_n or kb % tile_k:
        raise VTAProgramError(f"tiles {tile_m}, {tile_n}, {tile_k} do not divide {mb}, {nb}, {kb}")
    tiles = [(mo, no) for mo in range(mb // tile_m) for no in range(nb // tile_n)]
    if vthreads not in (1, 2) or len(tiles) % vthreads:
        raise VTAProgramError(
            f"{len(tiles)} output tiles cannot be split over {vthreads} virtual threads"
        )

    b = ProgramBuilder(cfg)
    a_buf = b.alloc("A", "INP", (mb, kb, *cfg.elem_shape("INP")))
    w_buf = b.alloc("W", "WGT", (nb, kb, *cfg.elem_shape("WGT")))
    c_buf = b.alloc("C", "OUT", (mb, nb, *cfg.elem_shape("OUT")))
    bias_buf = b.alloc("bias", "ACC", (nb, *cfg.elem_shape("ACC"))) if bias else None

    inp_tile, wgt_tile = tile_m * tile_k, tile_n * tile_k
    out_tile = tile_m * tile_n
    acc_tile = out_tile + (tile_n if bias else 0)
    gemm_k, alu_k, bias_k = [], [], []
    for t in range(vthreads):
        ib, wb, ab = t * inp_tile, t * wgt_tile, t * acc_tile
        if fold_m:
            gemm_k.append(b.kernel([(ab + j, ib, wb + j * tile_k) for j in range(tile_n)]))
        else:
            gemm_k.append(
                b.kernel(
                    [
                        (ab + i * tile_n + j, ib + i * tile_k, wb + j * tile_k)
                        for i in range(tile_m)
                        for j in range(tile_n)
                    ]
                )
            )
        outs = [
            (ab + i * tile_n + j, ab + i * tile_n + j, 0)
            for i in range(tile_m)
            for j in range(tile_n)
        ]
        alu_k.append(b.kernel(outs))
        if bias:
            bias_k.append(
                b.kernel([(d, ab + out_tile + j % tile_n, 0) for j, (d, _, _) in enumerate(outs)])
            )
    gemm_loops = (
        {
            "iter_out": tile_k,
            "iter_in": tile_m,
            "dst": (0, tile_n),
            "src": (1, tile_k),
            "wgt": (1, 0),
        }
        if fold_m
        else {"iter_out": tile_k, "dst": (0, 0), "src": (1, 0), "wgt": (1, 0)}
    )

    n_units = len(tiles) * (kb // tile_k)  # load/GEMM units, in program order
    unit = 0
    for g in range(0, len(tiles), vthreads):
        group = tiles[g : g + vthreads]
        for t, (_, no) in enumerate(group):
            if g + t >= vthreads:
                b.dep_pop(Engine.STORE, Engine.COMPUTE)  # the store of this SRAM half is done
            if bias_buf is not None:
                b.load(
                    bias_buf,
                    sram_base=t * acc_tile + out_tile,
                    y_size=1,
                    x_size=tile_n,
                    at=no * tile_n,
                )
            reset_loops = {k: v for k, v in gemm_loops.items() if k != "iter_out"}
            b.gemm(gemm_k[t], reset=True, **reset_loops)
        for ko in range(kb // tile_k):
            for t, (mo, no) in enumerate(group):
                if unit + t >= vthreads:
                    b.dep_pop(Engine.COMPUTE, Engine.LOAD)  # GEMM of this half is done
                b.load(
                    a_buf,
                    sram_base=t * inp_tile,
                    y_size=tile_m,
                    x_size=tile_k,
                    x_stride=kb,
                    at=(mo * tile_m, ko * tile_k),
                )
                b.load(
                    w_buf,
                    sram_base=t * wgt_tile,
                    y_size=tile_n,
                    x_size=tile_k,
                    x_stride=kb,
                    at=(no * tile_n, ko * tile_k),
                )
                b.dep_push(Engine.LOAD, Engine.COMPUTE)
            for t in range(len(group)):
                b.dep_pop(Engine.LOAD, Engine.COMPUTE)
                b.gemm(gemm_k[t], **gemm_loops)
                if unit + t + vthreads < n_units:
                    b.dep_push(Engine.COMPUTE, Engine.LOAD)
            unit += len(group)
        for t in range(len(group)):
            if bias:
                b.alu(AluOp.ADD, bias_k[t])
            for op, imm in epilogue:
                b.alu(op, alu_k[t], imm=imm)
            b.dep_push(Engine.COMPUTE, Engine.STORE)
        for t, (mo, no) in enumerate(group):
            b.dep_pop(Engine.COMPUTE, Engine.STORE)
            b.store(
                c_buf,
                sram_base=t * acc_tile,
                y_size=tile_m,
                x_size=tile_n,
                x_stride=nb,
                at=(mo * tile_m, no * tile_n),
            )
            if g + t + vthreads < len(tiles):
                b.dep_push(Engine.STORE, Engine.COMPUTE)
    return b.finish()


def pack_gemm_operands(
    a: np.ndarray, w: np.ndarray, config: VTAConfig | None = None
) -> dict[str, np.ndarray]:
    """``A (M, K)`` and ``W (N, K)`` in :func:`gemm_program`'s packed layouts."""
    cfg = config or VTAConfig()
    (m, k), (n, _) = a.shape, w.shape
    bi, bo, bt = cfg.block_in, cfg.block_out, cfg.batch
    a_p = a.reshape(m // bt, bt, k // bi, bi).transpose(0, 2, 1, 3)
    w_p = w.reshape(n // bo, bo, k // bi, bi).transpose(0, 2, 1, 3)
    return {"A": np.ascontiguousarray(a_p), "W": np.ascontiguousarray(w_p)}


def unpack_gemm_output(c: np.ndarray) -> np.ndarray:
    """``C (M/BATCH, N/BLOCK_OUT, BATCH, BLOCK_OUT)`` back to ``(M, N)``."""
    mb, nb, bt, bo = c.shape
    return c.transpose(0, 2, 1, 3).reshape(mb * bt, nb * bo)
