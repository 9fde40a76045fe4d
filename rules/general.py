"""The general rule set's own rules: computes (or stages) that no intrinsic runs.

With them, a target tunes any TE compute (Heron §4's CPU rules; Ansor Table 2): a stage with
data reuse is tiled by :class:`~heronlike.rules.tiling.MultiLevelTiling` with an innermost
vector level ``V`` on its output's contiguous axis, parallelised and unrolled by
:mod:`heronlike.rules.parallel`, and finished here:

* :class:`FuseEpilogue`: an element-wise output stage (bias add, ReLU, requantize …, the
  intermediate element-wise stages being inlined into it by Always-Inline) that consumes one
  tiled reduction is computed inside that reduction's tile loops (``reverse_compute_at`` at a
  knob-chosen level, like a cache write-back), so the reduction's result never goes through
  memory as a whole. It also applies to a tensorized reduction (int8 GEMM + bias + ReLU), and
  to an output larger than the reduction that reads it in blocks (:func:`reads_in_blocks`: the
  sub-pixel transposed convolution's placement stage, each product written with its zeros,
  which :func:`heronlike.postproc.spread_zero_stores` stores between the reduction's steps).
* :class:`PackVectorOperand`: the weight is pre-packed with the vectorised axis innermost, so
  vector loads are contiguous (``W[j, k]`` of a float32 GEMM is stored ``[k, j]``).
* :class:`VectorizeGeneral`: on a tiled stage that is not tensorized, ``V`` is vectorised
  (C: its extent is a divisor of the axis, C3, and at most one vector register, LE), the
  reduction's initialisation is separated and vectorised, and so is the write-back; a
  convolution's padding taps are skipped (:mod:`~heronlike.rules.skip_padding`).
* :class:`ScheduleInjective`: a stand-alone element-wise output stage: outer loops fused and
  parallel, the innermost loop split to one vector register (a knob-chosen one to four with
  the general rule set) and vectorised, an unroll-depth knob on the parallel loop. Its parallel
  loop is the row loop that :mod:`heronlike.rules.rows` computes the stage's row-wise
  producers under (softmax's max and sum, layer norm's moments).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from heronlike.csp import Le
from heronlike.dag import Stage
from heronlike.postproc import SPREAD_ZERO_STORES
from heronlike.template import Ref, Sym

from .base import Rule, RuleContext
from .constraints import add_candidates, divisors
from .parallel import unroll_knob
from .rows import set_row
from .skip_padding import skip_padding


def _inlinable(ctx: RuleContext, stage: str) -> bool:
    """What :class:`~heronlike.rules.inline.AlwaysInline` will inline (same condition)."""
    s = ctx.states[stage].stage
    return (
        s.is_injective
        and not s.is_output
        and stage not in ctx.matches
        and bool(ctx.dag.consumers(stage))
    )


def epilogue_anchor(ctx: RuleContext, stage: str) -> str | None:
    """The one tiled reduction an element-wise output ``stage`` consumes, looking through
    stages that get inlined into it; None if there is not exactly one, or if that reduction
    (or an inlined stage in between) feeds anything else."""
    found = _epilogue(ctx, stage)
    return found[0] if found is not None else None


def _epilogue(ctx: RuleContext, stage: str) -> tuple[str, set[str]] | None:
    """:func:`epilogue_anchor` and the stages inlined on the way to it."""
    anchors: set[str] = set()
    chain: set[str] = set()
    todo = list(ctx.dag.producers(stage))
    while todo:
        p = todo.pop()
        if _inlinable(ctx, p):
            chain.add(p)
            todo += ctx.dag.producers(p)
        else:
            anchors.add(p)
    if len(anchors) != 1:
        return None
    (anchor,) = anchors
    a = ctx.states[anchor]
    if a.stage.is_output or not a.stage.has_data_reuse or a.write_back is not None:
        return None
    out = ctx.states[stage].stage
    larger = math.prod(out.write.shape) > math.prod(a.stage.write.shape)
    if larger and (chain or not reads_in_blocks(out, a.stage)):
        # more outputs than the reduction has (a scatter with zeros between, as in the
        # sub-pixel transposed convolution), not in blocks of their own: some would be
        # computed at no reduction tile, or before their products
        return None
    allowed = chain | {stage}
    for s in chain | {anchor}:
        if not set(ctx.dag.consumers(s)) <= allowed:
            return None
    return anchor, chain


def reads_in_blocks(stage: Stage, anchor: Stage) -> bool:
    """``stage`` reads ``anchor``'s output at one element per element, each dimension of
    extent > 1 at one of its axes or one of its axes divided by a constant (``oh // 2``), no
    axis in two dimensions. Then the elements of ``stage`` that read one tile of ``anchor``
    form a block no other tile's readers share, which ``reverse_compute_at`` computes exactly
    at that tile: the sub-pixel transposed convolution with 1 x 1 taps and no padding (T4, T6
    of Heron's table), each product placed with the zeros that follow it while its tile is in
    cache. An offset (``(oh + 1) // 3``) or a tap chosen by a remainder (``oh % 2`` of a
    2 x 2 kernel) makes tiles share readers, some of them computed before their product."""
    reads = [r for r in stage.reads if r.buffer == anchor.write.buffer]
    if len(reads) != 1 or len(reads[0].blocks) != len(reads[0].shape):
        return False
    used = []
    for extent, block in zip(reads[0].shape, reads[0].blocks, strict=True):
        if extent == 1:
            continue
        if block is None:
            return False
        used.append(block[0])
    return len(used) == len(set(used))


class FuseEpilogue(Rule):
    """Condition: an element-wise output stage whose producers (through inlined element-wise
    stages) are exactly one tiled reduction (:func:`epilogue_anchor`). Apply: inline the
    element-wise stages in between, and make the output stage that reduction's write-back, so
    :class:`~heronlike.rules.tiling.MultiLevelTiling` computes it at the reduction's ``S0`` or
    ``S1`` tile (``reverse_compute_at``, C4); an output larger than the reduction (a placement)
    is annotated :data:`~heronlike.postproc.SPREAD_ZERO_STORES`. Ends the stage."""

    name = "FuseEpilogue"

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            st.stage.is_injective
            and st.stage.is_output
            and not st.inlined
            and epilogue_anchor(ctx, stage) is not None
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        found = _epilogue(ctx, stage)
        assert found is not None
        anchor, chain = found
        # inline the element-wise stages on the way now: ``reverse_compute_at`` needs every
        # producer of the epilogue under the reduction's loops, and a stage that reads only
        # inputs (the dequantized residual of a quantized layer) comes after the reduction in
        # the output-first walk, too late (AlwaysInline then skips it)
        for p in sorted(chain):
            if not ctx.states[p].inlined:
                ctx.step("compute_inline", ctx.block(p))
                ctx.states[p].inlined = True
        ctx.states[anchor].write_back = ctx.block(stage)
        out, product = ctx.states[stage].stage, ctx.states[anchor].stage
        if math.prod(out.write.shape) > math.prod(product.write.shape):
            # a placement: its zeros go between the reduction's steps where it is computed at
            # the product's register tile (heronlike.postproc.spread_zero_stores)
            ctx.step("annotate", ctx.block(stage), SPREAD_ZERO_STORES, 1)

    def next(self, ctx: RuleContext, stage: str) -> bool:
        return False


@dataclass(frozen=True)
class PermutedLayout:
    """Index map that moves dimension ``dim`` of a buffer innermost (a transpose):
    ``(x0, .., x_dim, .., xn) -> (x0, .., xn, x_dim)``. Same interface as
    :class:`heronlike.template.PackedLayout` (``transform_layout`` index map, ``pack``)."""

    rank: int
    dim: int

    def __call__(self, *idx: Any) -> tuple[Any, ...]:
        return tuple(x for d, x in enumerate(idx) if d != self.dim) + (idx[self.dim],)

    def packed_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(self(*shape))

    def pack(self, array: Any) -> Any:
        """Apply the layout to a numpy array (the one-time weight pre-packing)."""
        import numpy as np

        order = [d for d in range(self.rank) if d != self.dim] + [self.dim]
        return np.ascontiguousarray(array.transpose(order))

    def __str__(self) -> str:
        names = [f"x{d}" for d in range(self.rank)]
        return f"lambda {', '.join(names)}: ({', '.join(self(*names))})"


class PackVectorOperand(Rule):
    """Condition: a tiled stage without an intrinsic whose vectorised axis (level ``V``)
    indexes a non-innermost dimension of its weight (the second multiply operand, by the
    :mod:`heronlike.ops` convention, and a function parameter), e.g. ``W[j, k]`` of a float32
    GEMM or ``Wt[c, rh, rw]`` of a depthwise convolution. Apply: re-lay the weight out with that
    dimension innermost (``transform_layout``; one-time weight pre-packing, outside the measured
    time, like the DL Boost packed weights), so the vector loads are contiguous instead of
    gathers."""

    name = "PackVectorOperand"

    def __init__(self, level: str = "V") -> None:
        self.level = level

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        return self._target(ctx, stage) is not None

    def _target(self, ctx: RuleContext, stage: str) -> tuple[str, int, int] | None:
        st = ctx.states[stage]
        vec = st.level(self.level)
        mac = st.stage.mac
        if st.match is not None or not vec or mac is None or self.name in st.applied:
            return None
        weight = mac.b
        params = {p.name for p in ctx.dag.params}
        if weight.buffer not in params or weight.buffer in ctx.packed:
            return None
        if not ctx.may_pack(weight.buffer):
            return None
        axis = vec[0].axis
        if axis not in weight.axes:
            return None
        dim = weight.axes.index(axis)
        if dim == len(weight.axes) - 1:
            return None
        return weight.buffer, len(weight.axes), dim

    def apply(self, ctx: RuleContext, stage: str) -> None:
        found = self._target(ctx, stage)
        assert found is not None
        buffer, rank, dim = found
        layout = PermutedLayout(rank, dim)
        ctx.step("transform_layout", ctx.block(stage), buffer, layout)
        ctx.packed[buffer] = layout  # type: ignore[assignment]


class VectorizeGeneral(Rule):
    """Condition: a tiled stage that no intrinsic runs. Apply: vectorise its ``V`` loop
    (constraint: extent at most one vector register of the output dtype), split the
    reduction's initialisation off (``decompose_reduction``, after ``parallel`` as TVM
    requires) and vectorise it and the write-back's innermost loop. A multiply-accumulate
    that reads a zero-padding stage (inlined into it by Always-Inline) has its padding taps
    skipped (:func:`~heronlike.rules.skip_padding.skip_padding`).

    Args:
        vector_bytes: vector register width in bytes (64 for AVX-512).
        level: the tiling level that :class:`~heronlike.rules.tiling.MultiLevelTiling` puts
            innermost for vectorisation.
    """

    name = "VectorizeGeneral"

    def __init__(self, vector_bytes: int = 64, level: str = "V") -> None:
        self.vector_bytes = vector_bytes
        self.level = level

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.match is None and any(lp.level for lp in st.loops) and not st.inlined

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        lanes = max(1, self.vector_bytes // st.stage.write.itemsize)
        for loop in st.level(self.level):
            if isinstance(loop.extent, str):
                ctx.csp.add(Le(loop.extent, lanes))
            ctx.annotate_loop("vectorize", loop)
        reduce = [lp for lp in st.loops if lp.kind == "R"]
        if reduce:
            block = ctx.block(stage)
            (init,) = ctx.step(
                "decompose_reduction", block, Sym(reduce[0].sym), outs=[f"{block}.init"]
            )
            ctx.step("vectorize_innermost", init, lanes)
            mac = st.stage.mac
            if mac is not None:  # a convolution's padding taps (inlined here) are skipped
                skip_padding(ctx, stage, block, (mac.a.buffer, mac.b.buffer))
        if st.write_back is not None:
            ctx.step("vectorize_innermost", st.write_back, lanes)

    def next(self, ctx: RuleContext, stage: str) -> bool:
        return False


class ScheduleInjective(Rule):
    """Condition: an element-wise output stage nothing else scheduled (no tiling, not fused,
    not inlined). Apply: fuse all loops but the innermost into one ``parallel`` loop and split
    the innermost to a divisor of its extent that fits one vector register, vectorised.

    Without ``knobs`` (strict DL Boost, the rule set its records were tuned with) the space of
    such a stage is a single program. With ``knobs`` (the general rule set) two knobs make
    it a space, as MetaSchedule's ``ParallelizeVectorizeUnroll`` samples for the same loops:

    * ``<stage>.vec``: the vectorised extent, a divisor of the innermost extent that is a
      multiple of the one-register choice, up to ``max_vectors`` registers (IN; LLVM splits a
      longer vector into registers, an unrolled, independent stream); no knob when only one
      divisor qualifies;
    * ``<stage>.unroll``: ``pragma_auto_unroll_max_step`` of the parallel loop over
      ``unroll_depths`` (:func:`~heronlike.rules.parallel.unroll_knob`). Row-wise producers
      computed under that loop (:mod:`heronlike.rules.rows`) are unrolled by it too.

    Args:
        vector_bytes: vector register width in bytes.
        knobs: give the stage the two knobs.
        max_vectors: the widest vectorised extent with ``knobs``, in vector registers.
        unroll_depths: the unroll depths with ``knobs``.
    """

    name = "ScheduleInjective"

    def __init__(
        self,
        vector_bytes: int = 64,
        knobs: bool = False,
        max_vectors: int = 4,
        unroll_depths: Sequence[int] = (0, 16, 64, 512),
    ) -> None:
        self.vector_bytes = vector_bytes
        self.knobs = knobs
        self.max_vectors = max_vectors
        self.unroll_depths = tuple(unroll_depths)

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            st.stage.is_injective
            and st.stage.is_output
            and not st.inlined
            and not st.loops
            and not ctx.dag.consumers(stage)
        )

    def _vector(self, ctx: RuleContext, stage: str, extent: int, lanes: int) -> int | Ref:
        """The vectorised extent: the largest divisor of ``extent`` up to ``lanes``, or with
        ``knobs`` a knob over the divisors of ``extent`` that are multiples of that one, up
        to ``max_vectors * lanes``."""
        vec = max(d for d in range(1, min(extent, lanes) + 1) if extent % d == 0)
        if not self.knobs:
            return vec
        widths = [d for d in divisors(extent) if d % vec == 0 and d <= self.max_vectors * lanes]
        if len(widths) < 2:
            return vec
        knob = ctx.csp.var(
            f"{stage}.vec",
            min(widths),
            max(widths),
            knob=True,
            doc="vectorised extent of the innermost loop",
        )
        add_candidates(ctx.csp, knob, widths)
        return Ref(knob)

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        loops = ctx.loops(stage)
        lanes = max(1, self.vector_bytes // st.stage.write.itemsize)
        extent = st.stage.axis(loops[-1].axis).extent
        vec = self._vector(ctx, stage, extent, lanes)
        inner = Sym(loops[-1].sym)
        if len(loops) == 1:
            outer, inner = ctx.step(
                "split", inner, (None, vec), outs=[f"{stage}.outer", f"{stage}.vec"]
            )
        elif len(loops) == 2:
            outer = Sym(loops[0].sym)
        else:
            (outer,) = ctx.step(
                "fuse", tuple(Sym(lp.sym) for lp in loops[:-1]), outs=[f"{stage}.outer"]
            )
        ctx.step("parallel", outer)
        if len(loops) > 1:  # producers of the same rows may be computed under it (rows.py)
            set_row(ctx, stage, outer, len(loops) - 1)
        if len(loops) > 1 and (isinstance(vec, Ref) or vec < extent):
            _, inner = ctx.step("split", inner, (None, vec), outs=[f"{stage}.row", f"{stage}.vec"])
        if isinstance(vec, Ref) or vec > 1:
            ctx.step("vectorize", inner)
        if self.knobs:
            unroll_knob(ctx, stage, outer, self.unroll_depths)
