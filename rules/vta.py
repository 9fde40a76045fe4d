"""VTA rules: tile a GEMM into VTA tiles and constrain the tiles by VTA's buffers and ISA.

The stage ``C[i, j] += A[i, k] * B[j, k]`` (already matched by
:class:`~heronlike.rules.tensorize.Tensorize` onto the ``BATCH × BLOCK_OUT × BLOCK_IN`` GEMM
intrinsic, 1 × 16 × 16 by default) is tiled as

``i.S0  j.S0  j.V  k.R0 | k.R1  i.S1  j.S1 | j.T  k.T``   (``order = 0``; ``order = 1`` swaps
``i.S0`` and ``j.S0``)

* ``i.S0, j.S0`` walk the output tiles (``order`` picks which is outer: it decides which
  operand a program whose K fits one tile keeps resident across neighbouring tiles);
* ``j.V`` is the virtual thread (``vthreads`` ∈ {1, 2}): the output tiles of one ``(i.S0,
  j.S0)`` group alternate between two halves of every SRAM buffer, so one thread's loads overlap
  the other's GEMM (vta.md §2.5). Making it a split of ``j`` keeps the tile count a multiple
  of the thread count by construction (C1);
* ``k.R0`` is the loop of DMA loads (one input and one weight tile per iteration);
* ``k.R1, i.S1, j.S1`` are one GEMM instruction: ``k.R1`` its ``iter_out`` loop, ``i.S1 ×
  j.S1`` its micro-ops (``fold = 1`` moves ``i.S1`` into ``iter_in`` instead: ``j.S1``
  micro-ops);
* ``j.T, k.T`` (and BATCH = 1 rows of ``i``) are the intrinsic, tensorized.

Tile sizes in elements of the buffers: input ``tile_m · tile_k``, weight ``tile_n · tile_k``,
accumulator ``tile_m · tile_n`` (``tile_m = i.S1``, ``tile_n = j.S1``, ``tile_k = k.R1``).
:class:`VTABufferLimits` bounds them (Heron Table 3 plus what it left out):

* input, weight, accumulator bytes × vthreads ≤ each buffer's capacity (C5);
* micro-ops resident at once (GEMM and ALU kernels of every thread) ≤ the micro-op buffer;
* instruction fields within their encoding widths: ``iter_out``/``iter_in`` (14 bits), the
  folded loop's index factors (accumulator and input index widths);
* accumulator access distance: a GEMM revisits an accumulator address every
  ``tile_m · tile_n`` micro-ops, which must be ≥ the hazard distance (3, ``VerifyDep``).

Every variable the code generator reads is aliased under a fixed ``vta.*`` name
(``vta.tile_m``, ``vta.m_blocks`` …), so it reads the assignment without knowing the stage.
This module knows VTA only through :class:`VTALimits` (plain numbers the target fills in).
"""

from __future__ import annotations

from dataclasses import dataclass

from heronlike.csp import Eq, In, Le, Prod, Select, Sum
from heronlike.errors import UnsupportedComputeError, UnsupportedShapeError
from heronlike.intrinsic import structural_match
from heronlike.template import Choice, Sym

from .base import ConstraintRule, Rule, RuleContext

#: names of the aliased variables the code generator reads
PARAMS = (
    "m_blocks",
    "n_blocks",
    "k_blocks",
    "tile_m",
    "tile_n",
    "tile_k",
    "vthreads",
    "order",
    "fold",
)


@dataclass(frozen=True)
class VTALimits:
    """What the VTA rules need to know about the hardware (all from ``VTAConfig``).

    Attributes:
        inp_bytes, wgt_bytes, acc_bytes: on-chip buffer capacities in bytes.
        uop_depth: micro-ops the micro-op buffer holds.
        inp_elem_bytes, wgt_elem_bytes, acc_elem_bytes: bytes of one tensor element of each
            buffer (16, 256, 64 by default).
        loop_iter_bits: width of ``iter_out``/``iter_in`` (14).
        acc_index_bits, inp_index_bits, wgt_index_bits: widths of index factors (11, 11, 10).
        stride_bits: width of a DMA's ``x_stride`` and ``y_size``/``x_size`` (16).
        hazard_distance: smallest legal distance between GEMM writes of one accumulator (3).
        block_in, block_out: the intrinsic's k and n (16, 16).
        max_vthreads: virtual threads the space may use (2).
    """

    inp_bytes: int
    wgt_bytes: int
    acc_bytes: int
    uop_depth: int
    inp_elem_bytes: int
    wgt_elem_bytes: int
    acc_elem_bytes: int
    loop_iter_bits: int
    acc_index_bits: int
    inp_index_bits: int
    wgt_index_bits: int
    stride_bits: int
    hazard_distance: int
    block_in: int
    block_out: int
    max_vthreads: int = 2


def _gemm_axes(ctx: RuleContext, stage: str) -> tuple[str, str, str]:
    """The (m, n, k) axes of a plain 2-D GEMM stage.

    Raises:
        UnsupportedComputeError: a batch axis, several axes of one role, or other stages.
    """
    st = ctx.states[stage]
    found = structural_match(st.stage)
    if found is None:  # pragma: no cover - the stage matched an intrinsic
        raise UnsupportedComputeError(f"stage {stage} is not a multiply-accumulate")
    _, _, roles = found
    if roles["batch"] or len(roles["m"]) != 1 or len(roles["n"]) != 1 or len(roles["k"]) != 1:
        raise UnsupportedComputeError(
            f"the VTA target runs a 2-D GEMM C[m, n] += A[m, k] * B[n, k] (one m, n and k axis, "
            f"no batch); stage {stage} has axes {dict(roles)}"
        )
    if len(ctx.dag.stages) != 1:
        raise UnsupportedComputeError(
            "the VTA target runs a GEMM alone (no producer or epilogue stage yet); the compute has "
            + ", ".join(s.name for s in ctx.dag.stages)
        )
    return roles["m"][0], roles["n"][0], roles["k"][0]


class VTAGemmTiling(Rule):
    """Tile a tensorizable GEMM into VTA tiles (see the module docstring).

    Condition: the stage was matched by ``Tensorize`` and is not tiled yet.
    """

    name = "VTA.GemmTiling"

    def __init__(self, limits: VTALimits) -> None:
        self.limits = limits

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.match is not None and not st.level("T")

    def apply(self, ctx: RuleContext, stage: str) -> None:
        lim = self.limits
        m_ax, n_ax, k_ax = _gemm_axes(ctx, stage)
        st = ctx.states[stage]
        ext = {ax.name: int(ax.extent) for ax in st.stage.axes}
        mb, nb, kb = ext[m_ax], ext[n_ax] // lim.block_out, ext[k_ax] // lim.block_in
        if max(mb, nb, kb) >= 1 << lim.stride_bits:
            raise UnsupportedShapeError(
                f"VTA DMA strides hold {lim.stride_bits} bits: {mb} × {nb} × {kb} blocks is too "
                "large for one program"
            )
        loops = {lp.axis: lp for lp in ctx.loops(stage)}
        i_s0, i_s1 = ctx.split(stage, loops[m_ax], ("S0", "S1"), {})
        j_s0, j_v, j_s1, j_t = ctx.split(
            stage, loops[n_ax], ("S0", "V", "S1", "T"), {"T": lim.block_out}
        )
        k_r0, k_r1, k_t = ctx.split(stage, loops[k_ax], ("R0", "R1", "T"), {"T": lim.block_in})
        csp = ctx.csp
        csp.add(In(str(j_v.extent), tuple(range(1, lim.max_vthreads + 1))))
        order = csp.var(
            f"{stage}.order", 0, 1, knob=True, doc="output-tile order: 0 rows outer, 1 cols outer"
        )
        fold = csp.var(
            f"{stage}.fold", 0, 1, knob=True, doc="GEMM rows as iter_in (1) or as micro-ops (0)"
        )
        inner = (k_r1, i_s1, j_s1, j_t, k_t)
        orders = ((i_s0, j_s0, j_v, k_r0, *inner), (j_s0, i_s0, j_v, k_r0, *inner))
        ctx.step("reorder", Choice(order, tuple(tuple(Sym(lp.sym) for lp in o) for o in orders)))
        st.loops = list(orders[0])
        ctx.step("annotate", Sym(j_v.sym), "vta.virtual_thread", 1)
        # aliases the code generator reads (knobs stay the split parts)
        alias = {
            "tile_m": i_s1.extent,
            "tile_n": j_s1.extent,
            "tile_k": k_r1.extent,
            "vthreads": j_v.extent,
            "order": order,
            "fold": fold,
        }
        for name, var in alias.items():
            hi = csp.vars[str(var)].hi
            csp.var(f"vta.{name}", 0 if name in ("order", "fold") else 1, hi, doc=f"= {var}")
            csp.add(Eq(f"vta.{name}", var))
        for name, value in (("m_blocks", mb), ("n_blocks", nb), ("k_blocks", kb)):
            csp.var(f"vta.{name}", value, value, doc="GEMM extent in intrinsic blocks")
        st.extra["vta"] = {name: f"vta.{name}" for name in PARAMS}


class VTABufferLimits(ConstraintRule):
    """C5 and C6 for VTA: buffer capacities (× virtual threads), micro-op buffer, instruction
    field widths and the accumulator hazard distance (see the module docstring)."""

    name = "VTA.BufferLimits"

    def __init__(self, limits: VTALimits) -> None:
        self.limits = limits

    def constrain(self, ctx: RuleContext) -> None:
        lim, csp = self.limits, ctx.csp
        if not any("vta" in st.extra for st in ctx.states.values()):
            return
        tm, tn, tk, vt, fold = (
            "vta.tile_m",
            "vta.tile_n",
            "vta.tile_k",
            "vta.vthreads",
            "vta.fold",
        )
        hi = {v: csp.vars[v].hi for v in (tm, tn, tk, vt)}

        def prod(name: str, factors: tuple[str | int, ...], doc: str) -> str:
            upper = 1
            for f in factors:
                upper *= f if isinstance(f, int) else csp.vars[f].hi
            csp.var(name, 1, max(upper, 1), doc=doc)
            csp.add(Prod(name, factors))
            return name

        for name, factors, cap in (
            ("vta.inp_bytes", (vt, tm, tk, lim.inp_elem_bytes), lim.inp_bytes),
            ("vta.wgt_bytes", (vt, tn, tk, lim.wgt_elem_bytes), lim.wgt_bytes),
            ("vta.acc_bytes", (vt, tm, tn, lim.acc_elem_bytes), lim.acc_bytes),
        ):
            csp.add(Le(prod(name, factors, "bytes live in the buffer, all threads"), cap))
        # accumulator access distance of the GEMM micro-op stream (folded or not)
        out_tile = prod("vta.acc_tile", (tm, tn), "accumulator elements of one thread's tile")
        csp.add(Le(lim.hazard_distance, out_tile))
        # micro-ops resident at once: per thread one GEMM kernel (tile_m·tile_n micro-ops, or
        # tile_n folded) and one ALU kernel (tile_m·tile_n)
        gemm_uops = csp.var("vta.gemm_uops", 1, hi[tm] * hi[tn], doc="GEMM kernel micro-ops")
        csp.add(Select(gemm_uops, fold, (out_tile, tn)))
        per_thread = csp.var("vta.thread_uops", 1, 2 * hi[tm] * hi[tn], doc="micro-ops/thread")
        csp.add(Sum(per_thread, (gemm_uops, out_tile)))
        csp.add(Le(prod("vta.uops", (vt, per_thread), "micro-ops resident"), lim.uop_depth))
        # instruction fields: GEMM iter_out = tile_k, iter_in = tile_m when folded, and the
        # folded loop's factors dst_factor_in = tile_n (ACC index), src_factor_in = tile_k (INP)
        iter_max = (1 << lim.loop_iter_bits) - 1
        csp.add(Le(tk, iter_max))
        csp.add(Le(tm, iter_max))
        csp.add(Le(tn, (1 << lim.acc_index_bits) - 1))
        csp.add(Le(tk, (1 << lim.inp_index_bits) - 1))
        # DMA sizes: rows and row lengths of every load and store
        size_max = (1 << lim.stride_bits) - 1
        for v in (tm, tn, tk):
            csp.add(Le(v, size_max))
