"""Lowering a VTA GEMM candidate to a VTA program, and the build function the builder runs.

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

The program (:func:`gemm_int32_program`) follows the schedule's loop nest:

* output tiles in the order ``order`` picks, grouped by ``vthreads``: the tiles of one group
  use alternate halves of the input, weight and accumulator buffers;
* per group: a reset GEMM per thread, then per ``k`` tile the DMA loads of every thread (they
  wait for the GEMM that last read that half), then every thread's GEMM (it waits for its
  loads); when ``K`` fits one tile and the previous group used the same input rows (or weight
  columns), those loads are skipped: the tile is still in that half;
* the int32 write-back. VTA's STORE truncates accumulators to the 8-bit output width, so an
  int32 result leaves as four byte planes: store plane 0, ALU ``SHR 8``, store plane 1, … The
  DMA moves the same 4 bytes per element an int32 store would; the three ALU passes and the
  store↔compute round trips are real costs of VTA and are simulated as such.

Tokens are placed as TVM's coprocessor-sync pass did (load→compute after the loads,
compute→load after the GEMM that frees a half, compute→store before each store, store→compute
after it), so every pop has its push and the queues are empty at FINISH.

Data layout: the logical ``X (M, K)`` and ``W (N, K)`` int8 arrays are packed into VTA's tiled
DRAM layouts by the host (:func:`~.examples.pack_gemm_operands`), as VTA's runtime did, outside
the measured program; see :mod:`.runner`.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from heronlike.errors import VTAProgramError

from .builder import ProgramBuilder
from .config import VTAConfig
from .examples import pack_gemm_operands, unpack_gemm_output
from .isa import AluOp, Engine
from .program import Program

#: bytes of an int32 accumulator leaving VTA through 8-bit stores
PLANES = 4
#: format tag of the artifact the build function writes
ARTIFACT_FORMAT = "heronlike-vta-program/1"


@dataclass(frozen=True)
class GemmParams:
    """A VTA GEMM candidate: extents in intrinsic blocks and the schedule's parameters
    (the ``vta.*`` variables of :mod:`heronlike.rules.vta`)."""

    m_blocks: int
    n_blocks: int
    k_blocks: int
    tile_m: int
    tile_n: int
    tile_k: int
    vthreads: int = 1
    order: int = 0
    fold: int = 0

    @classmethod
    def from_assignment(cls, assignment: Mapping[str, int]) -> GemmParams:
        """Read the ``vta.*`` variables of a CSP assignment.

        Raises:
            VTAProgramError: a variable is missing.
        """
        try:
            return cls(**{f: int(assignment[f"vta.{f}"]) for f in cls.__dataclass_fields__})
        except KeyError as exc:
            raise VTAProgramError(f"assignment has no VTA parameter {exc}") from None


def gemm_int32_program(p: GemmParams, config: VTAConfig | None = None) -> Program:
    """The VTA program of ``C (M, N) int32 = X (M, K) int8 @ W (N, K).T int8`` for ``p``.

    DRAM buffers: ``A (M/BATCH, K/BLOCK_IN, BATCH, BLOCK_IN)``, ``W (N/BLOCK_OUT, K/BLOCK_IN,
    BLOCK_OUT, BLOCK_IN)`` and ``C (4·M/BATCH, N/BLOCK_OUT, BATCH, BLOCK_OUT)`` int8, byte
    plane ``q`` of the result in rows ``q·M/BATCH …`` (:func:`unpack_int32_output`).

    Raises:
        VTAProgramError: tiles that do not divide the extents, ``vthreads`` not in {1, 2} or
            not dividing the column tiles; the simulator's checks raise the rest.
    """
    cfg = config or VTAConfig()
    mb, nb, kb = p.m_blocks, p.n_blocks, p.k_blocks
    tm, tn, tk, vt = p.tile_m, p.tile_n, p.tile_k, p.vthreads
    if vt not in (1, 2) or mb % tm or nb % (tn * vt) or kb % tk:
        raise VTAProgramError(f"parameters {p} do not tile {mb} × {nb} × {kb} blocks")
    mo_n, no_n, ko_n = mb // tm, nb // (tn * vt), kb // tk
    if p.order == 0:
        groups = [(mo, no) for mo in range(mo_n) for no in range(no_n)]
    else:
        groups = [(mo, no) for no in range(no_n) for mo in range(mo_n)]

    b = ProgramBuilder(cfg)
    a_buf = b.alloc("A", "INP", (mb, kb, *cfg.elem_shape("INP")))
    w_buf = b.alloc("W", "WGT", (nb, kb, *cfg.elem_shape("WGT")))
    c_buf = b.alloc("C", "OUT", (PLANES * mb, nb, *cfg.elem_shape("OUT")))

    inp_tile, wgt_tile, acc_tile = tm * tk, tn * tk, tm * tn
    gemm_k, alu_k = [], []
    for t in range(vt):
        ib, wb, ab = t * inp_tile, t * wgt_tile, t * acc_tile
        if p.fold:
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
        alu_k.append(b.kernel([(ab + e, ab + e, 0) for e in range(acc_tile)]))
    loops: dict[str, Any] = (
        {"iter_out": tk, "iter_in": tm, "dst": (0, tn), "src": (1, tk), "wgt": (1, 0)}
        if p.fold
        else {"iter_out": tk, "dst": (0, 0), "src": (1, 0), "wgt": (1, 0)}
    )
    reset_loops = {k: v for k, v in loops.items() if k != "iter_out"}

    n_tiles = len(groups) * vt
    n_units = n_tiles * ko_n  # (tile, k tile) pairs, in program order
    unit = 0
    prev: tuple[int, int] | None = None
    for gi, (mo, no) in enumerate(groups):
        g = gi * vt
        keep_a = ko_n == 1 and prev is not None and prev[0] == mo
        keep_w = ko_n == 1 and prev is not None and prev[1] == no
        for t in range(vt):
            if g + t >= vt:
                b.dep_pop(Engine.STORE, Engine.COMPUTE)  # this half's last byte plane is out
            b.gemm(gemm_k[t], reset=True, **reset_loops)
        for ko in range(ko_n):
            for t in range(vt):
                if unit + t >= vt:
                    b.dep_pop(Engine.COMPUTE, Engine.LOAD)  # the GEMM reading this half is done
                if not keep_a:
                    b.load(
                        a_buf,
                        sram_base=t * inp_tile,
                        y_size=tm,
                        x_size=tk,
                        x_stride=kb,
                        at=(mo * tm, ko * tk),
                    )
                if not keep_w:
                    b.load(
                        w_buf,
                        sram_base=t * wgt_tile,
                        y_size=tn,
                        x_size=tk,
                        x_stride=kb,
                        at=((no * vt + t) * tn, ko * tk),
                    )
                b.dep_push(Engine.LOAD, Engine.COMPUTE)
            for t in range(vt):
                b.dep_pop(Engine.LOAD, Engine.COMPUTE)
                b.gemm(gemm_k[t], **loops)
                if unit + t + vt < n_units:
                    b.dep_push(Engine.COMPUTE, Engine.LOAD)
            unit += vt
        for q in range(PLANES):
            for t in range(vt):
                if q:
                    b.dep_pop(Engine.STORE, Engine.COMPUTE)  # plane q-1 of this half is out
                    b.alu(AluOp.SHR, alu_k[t], imm=8)
                b.dep_push(Engine.COMPUTE, Engine.STORE)
            for t in range(vt):
                b.dep_pop(Engine.COMPUTE, Engine.STORE)
                b.store(
                    c_buf,
                    sram_base=t * acc_tile,
                    y_size=tm,
                    x_size=tn,
                    x_stride=nb,
                    at=(q * mb + mo * tm, (no * vt + t) * tn),
                )
                if q < PLANES - 1 or g + t + vt < n_tiles:
                    b.dep_push(Engine.STORE, Engine.COMPUTE)
        prev = (mo, no)
    return b.finish()


def pack_inputs(x: np.ndarray, w: np.ndarray, config: VTAConfig | None = None) -> dict:
    """``X (M, K)`` and ``W (N, K)`` int8 as the program's ``A`` and ``W`` DRAM buffers."""
    return pack_gemm_operands(np.asarray(x, np.int8), np.asarray(w, np.int8), config)


def unpack_int32_output(c: np.ndarray) -> np.ndarray:
    """The program's ``C`` buffer (four int8 byte planes) as the int32 ``(M, N)`` result."""
    planes = c.reshape(PLANES, c.shape[0] // PLANES, *c.shape[1:])
    out = np.zeros(unpack_gemm_output(planes[0]).shape, np.uint32)
    for q in range(PLANES):
        byte = unpack_gemm_output(planes[q]).view(np.uint8).astype(np.uint32)
        out |= byte << np.uint32(8 * q)
    return out.view(np.int32)


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
