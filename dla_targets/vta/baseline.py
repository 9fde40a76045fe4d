"""The AutoTVM-style VTA baseline: TVM's VTA template spaces (vta.md §3), evaluated through the
same program generator (:mod:`.lowering`) and simulator (:mod:`.simulator`) as heronlike.

**The space.** TVM's VTA templates are "fixed skeleton + two-way splits + virtual-thread knobs"
with no validity filtering (vta.md §3):

* ``dense_packed.vta`` (GEMM; applied per batch for BMM, which had no VTA template): ``tile_b``
  (rows, :attr:`~.lowering.GemmParams.tile_m`), ``tile_co`` (``tile_n``), ``tile_ci``
  (``tile_k``), each a two-way ``define_split`` (every divisor), and ``oc_nthread`` ∈ {1, 2}
  (``vthreads``, splitting the outer output-channel loop: a point whose outer extent it does
  not divide is invalid). Fixed skeleton: output tiles rows outer (``order = 0``); the micro-op
  loops are folded as TVM's ``FoldUopLoop`` did, the reduction and row loops into
  ``iter_out``/``iter_in`` (``fold = 1``).
* ``conv2d_packed.vta`` (C2D): ``tile_h``, ``tile_w``, ``tile_ci``, ``tile_co`` two-way splits and
  ``oc_nthread`` ∈ {1, 2}; ``tile_b`` is 1 (batch 1) and **``h_nthread`` is fixed to 1**: the
  lowering has virtual threads over output channels only (and 2 × 2 threads would exceed VTA's
  2, vta.md §2.5). Skeleton: spatial tiles outer (``order = 0``), the lowering's GEMM structure.

heronlike's VTA space (:mod:`heronlike.rules.vta`) has the same tile splits and threads plus
the tile ``order`` and GEMM ``fold`` knobs, and constrains validity up front (buffers, micro-ops,
fields, hazard); AutoTVM discovered invalid points by failing to build or run them, so here an
invalid point is a trial that returns no latency (:data:`INVALID`).

**Search.** :func:`exhaustive` enumerates the whole space (the strongest possible AutoTVM-style
result: no tuner can beat the space's optimum); :func:`random_search` is AutoTVM's
``RandomTuner`` at a trial budget (sampling without replacement, invalid points count as
trials). Both skip the simulation of a point whose cycle lower bound (instruction fetch on the
shared port, :func:`cycle_lower_bound`) already reaches the best found: such a point cannot be
the best, so the result is exactly that of simulating everything.

Cycles are simulated (uncalibrated constants, :mod:`.timing`), deterministic.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from heronlike.errors import HeronlikeError

from .config import VTAConfig
from .lowering import KIND_C2D, SRC_BIAS, GemmParams, epilogue_of, gemm_int32_program
from .simulator import time_program
from .timing import TimingParams

#: the cycles recorded for an invalid point (AutoTVM's failed measurement)
INVALID = math.inf


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order (a two-way ``define_split``'s inner factors)."""
    return [d for d in range(1, n + 1) if n % d == 0]


def compute_params(compute: Sequence[object], target: str = "vta") -> GemmParams:
    """The geometry of a compute (a ``heronlike.ops`` list) as :class:`GemmParams` with all
    tiles 1, read from the constants heronlike's VTA rules derive (``vta.kind``, extents …).

    Raises:
        the typed errors of :func:`heronlike.space.generate_space` (unsupported dtype, shape or
        compute on VTA).
    """
    from heronlike.space import generate_space

    csp = generate_space(list(compute), target).csp
    fixed = {name: v.lo for name, v in csp.vars.items() if name.startswith("vta.") and v.lo == v.hi}
    consts = {
        name[4:]: v
        for name, v in fixed.items()
        if name[4:] in GemmParams.__dataclass_fields__ and name != "vta.epilogue"
    }
    tiles = {"tile_m": 1, "tile_n": 1, "tile_k": 1, "tile_h": 1, "tile_w": 1}
    return GemmParams(**{**tiles, **consts, "epilogue": epilogue_of(fixed)})


def autotvm_space(geometry: GemmParams) -> Iterator[GemmParams]:
    """Every point of the AutoTVM-style template space of ``geometry`` (module docstring),
    valid or not, in a fixed order (``vthreads`` outermost, then the splits)."""
    g = geometry
    for vt in (1, 2):
        if g.kind == KIND_C2D:
            for th, tw, tk, tn in itertools.product(
                divisors(g.out_h), divisors(g.out_w), divisors(g.k_blocks), divisors(g.n_blocks)
            ):
                yield replace(
                    g,
                    tile_h=th,
                    tile_w=tw,
                    tile_m=th * tw,
                    tile_n=tn,
                    tile_k=tk,
                    vthreads=vt,
                    order=0,
                    fold=0,
                )
        else:
            for tm, tk, tn in itertools.product(
                divisors(g.m_blocks), divisors(g.k_blocks), divisors(g.n_blocks)
            ):
                yield replace(g, tile_m=tm, tile_n=tn, tile_k=tk, vthreads=vt, order=0, fold=1)


def space_size(geometry: GemmParams) -> int:
    """Points in :func:`autotvm_space` (``oc_nthread`` × the product of the splits' divisors)."""
    g = geometry
    if g.kind == KIND_C2D:
        dims = (g.out_h, g.out_w, g.k_blocks, g.n_blocks)
    else:
        dims = (g.m_blocks, g.k_blocks, g.n_blocks)
    return 2 * math.prod(len(divisors(d)) for d in dims)


def cycle_lower_bound(p: GemmParams, config: VTAConfig, timing: TimingParams) -> int:
    """A lower bound on the simulated cycles of ``p``'s program without building it (vta.md
    §4.3 bounds): the largest of (a) the compute engine's busy time, in order, of the reset
    GEMMs, GEMMs and ALU passes (byte-plane shifts, epilogue) the lowering emits
    (:func:`~.timing.loop_cost`); (b) the load
    engine's busy time for input and weight loads when K spans several tiles (GEMM/BMM); (c)
    the instruction fetch beats on the shared port. Token no-ops and micro-op loads excluded.

    Returns:
        cycles; 0 for a point that does not tile its extents (it is invalid anyway).
    """
    t, cfg = timing, config
    if p.n_blocks % (p.tile_n * p.vthreads) or p.k_blocks % p.tile_k or p.m_blocks % p.tile_m:
        return 0
    tm, tn, tk = p.tile_m, p.tile_n, p.tile_k
    tiles = p.m_blocks // tm * (p.n_blocks // tn)
    ko = p.k_blocks // tk
    acc = tm * tn
    if p.kind == KIND_C2D:
        if p.out_h % p.tile_h or p.out_w % p.tile_w:
            return 0
        stores = 1 if p.tile_w == p.out_w else p.tile_h
        loads = tk + 1
        reset = t.gemm_fill + acc
        taps = p.kernel_h * p.kernel_w
        gemm = t.gemm_fill + tk * taps * acc + t.loop_refill * (tk * p.kernel_w - 1)
    else:
        tiles *= p.batch
        stores, loads = 1, 2
        refill_in = tm if p.fold else 1
        reset = t.gemm_fill + acc + t.loop_refill * (refill_in - 1)
        gemm = t.gemm_fill + tk * acc + t.loop_refill * (tk * refill_in - 1)
    alu = t.alu_fill + t.alu_imm_cycles_per_uop * acc
    # ALU passes per tile: the byte-plane shifts (int32 result) and the epilogue's operations
    # (a bias ADD reads a tensor operand over tile_n micro-ops × tile_m rows)
    bias_add = t.alu_fill + t.alu_cycles_per_uop * acc + t.loop_refill * (tm - 1)
    epi = [bias_add if src == SRC_BIAS else alu for _, _, src in p.epilogue]
    n_alu = p.planes - 1 + len(epi)
    compute = tiles * (reset + ko * gemm + (p.planes - 1) * alu + sum(epi))
    load = 0
    if ko > 1 and p.kind != KIND_C2D:
        bus = cfg.bus_bytes
        a_row = math.ceil(tk * cfg.elem_bytes("INP") / bus)
        w_row = math.ceil(tk * cfg.elem_bytes("WGT") / bus)
        per = 2 * t.dma_latency + tm * (t.read_row_overhead + a_row)
        per += tn * (t.read_row_overhead + w_row)
        load = tiles * ko * per
    loads_per_tile = loads * ko if ko > 1 else 0  # K in one tile: operands may stay resident
    insns = tiles * (1 + ko + loads_per_tile + n_alu + p.planes * stores)
    fetch = insns * math.ceil(t.fetch_bytes_per_insn / cfg.bus_bytes)
    return max(compute, load, fetch)


@dataclass(frozen=True)
class Evaluated:
    """One measured point: its parameters and simulated cycles (:data:`INVALID` if it failed
    to build or simulate, with the error)."""

    params: GemmParams
    cycles: float
    error: str = ""


def evaluate(
    p: GemmParams, config: VTAConfig | None = None, timing: TimingParams | None = None
) -> Evaluated:
    """Build and time ``p``'s program (timing-only simulation); never raises for an invalid
    point (buffer overflow, field width, hazard, micro-op kernel size): it is :data:`INVALID`."""
    try:
        report = time_program(gemm_int32_program(p, config), timing)
    except HeronlikeError as exc:
        return Evaluated(p, INVALID, f"{type(exc).__name__}: {exc}"[:200])
    return Evaluated(p, float(report.cycles))


@dataclass(frozen=True)
class SearchResult:
    """The best point of a search and what it cost.

    Attributes:
        best: the best valid point (None if none was valid).
        cycles: its simulated cycles (:data:`INVALID` if none).
        trials: points drawn (valid, invalid and pruned ones all count).
        invalid: points that failed (only among those simulated).
        simulated: points actually built and simulated (the others were pruned by the bound).
    """

    best: GemmParams | None
    cycles: float
    trials: int
    invalid: int
    simulated: int


def _search(
    points: Sequence[GemmParams], config: VTAConfig | None, timing: TimingParams | None
) -> SearchResult:
    cfg, t = config or VTAConfig(), timing or TimingParams.pynq_hls()
    bounds = [cycle_lower_bound(p, cfg, t) for p in points]
    best, best_cycles, invalid, simulated = None, INVALID, 0, 0
    for i in np.argsort(bounds, kind="stable"):
        if bounds[i] >= best_cycles:
            break  # sorted: no later point can beat the best
        res = evaluate(points[i], cfg, t)
        simulated += 1
        if res.cycles == INVALID:
            invalid += 1
        elif res.cycles < best_cycles:
            best, best_cycles = res.params, res.cycles
    return SearchResult(best, best_cycles, len(points), invalid, simulated)


def exhaustive(
    geometry: GemmParams, config: VTAConfig | None = None, timing: TimingParams | None = None
) -> SearchResult:
    """The optimum of the whole AutoTVM-style space (every point; pruned points provably
    cannot win)."""
    return _search(list(autotvm_space(geometry)), config, timing)


def random_search(
    geometry: GemmParams,
    trials: int,
    seed: int = 0,
    config: VTAConfig | None = None,
    timing: TimingParams | None = None,
) -> SearchResult:
    """AutoTVM's ``RandomTuner``: ``trials`` points drawn uniformly without replacement from the
    space (all of it when smaller), invalid points included; the best of them."""
    points = list(autotvm_space(geometry))
    rng = np.random.default_rng(seed)
    pick = rng.permutation(len(points))[: max(0, trials)]
    return _search([points[i] for i in sorted(pick)], config, timing)
