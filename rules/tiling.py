"""Multi-Level-Tiling (Ansor Table 2; Heron's ``generalTile``) with a register micro-kernel.

Every spatial axis is split into ``S0 S1 S2`` and every reduce axis into ``R0 R1``; an axis the
intrinsic covers gets one more, innermost part ``T`` fixed to the intrinsic's extent. Loops are
reordered ``S0 S1 R0 R1 S2 T``: ``S0`` is the parallel level, ``S1`` the cache tile, ``S2`` the
register tile and ``T`` the intrinsic. The register tile is innermost, below ``R1`` (the BLIS /
oneDNN micro-kernel form): its accumulators stay in registers across the whole ``R1`` loop and
every ``R1`` iteration issues ``|S2|`` independent multiply-accumulates on operands loaded once.
The order before heronlike 0.2.0, ``S0 S1 R0 S2 R1 T`` (Ansor's ``SSRSRS`` without its innermost
spatial level, Ansor §4.1), puts ``R1`` inside the register tile, so each accumulator's ``R1``
updates form one dependent chain unless ``R1`` is fully unrolled. On the same 24 random points of
each CSP, the micro-kernel order ran 1.30x faster in geomean over six int8 DL Boost cases and 1.51x
over three float32 ones, up to 6x (int8) and 11x (float32) on single points; points whose short
``R1`` the old order unrolled into straight-line code ran down to 0.65x (docs/results.md, "The
register micro-kernel order"). A write-back stage from
:class:`~heronlike.rules.cache_stage.AddCacheStage` is attached under ``S0`` or ``S1``, chosen by a
knob (C4 AddStageFuse).

With ``stream_order`` (e.g. ``S0 S1 R0 S2 R1 T``), a tensorized stage that streams an operand
(:attr:`~heronlike.rules.base.StageState.streams_operand`: the matrix of a matrix-vector
product, each element read once) gets the knob ``<stage>.stream`` (a SELECT between two
``reorder`` steps): 0 keeps the micro-kernel order, 1 takes ``stream_order``, in which ``R1``
inside ``S2`` reads the packed matrix in one contiguous run per intrinsic row block, as
MetaSchedule's ``SSRSRS`` reads it. Both orders have the same loops at each level, so every
constraint and compute location holds for both; the stage's nest lists the micro-kernel order.
No target turns it on: on a Zen 5 it made DL Boost's GEMVs no faster in tunes or on random
points, and without a write-back (which LLVM otherwise folds back into the micro-kernel order)
a streamed kernel ran up to 3x slower when its output and vector shared a 4 KiB page offset
(docs/results.md, "Matrix-vector products: the streaming order, measured and left off";
``benchmarks/gemv_stream.py``).

With ``vector_level`` (the general rule set), a stage that no intrinsic runs gets one more,
innermost spatial level on its output's contiguous (last) axis, ordered after everything
else (``S0 S1 R0 R1 S2 V``: a register tile of ``|S2|`` vectors), for
:class:`~heronlike.rules.general.VectorizeGeneral` to vectorise. Tensorized stages are tiled
exactly as without it.

With ``order_level`` (e.g. ``"S1"``, the cache tile), the order of that level's loops is a knob
(:meth:`~heronlike.rules.base.RuleContext.order_knobs`: one position knob per loop, a
permutation by SUM and PROD): loops whose extent can exceed 1 are permuted, those fixed to 1
stay first. Permuting loops inside one level changes neither the tile below the level nor the
loop that ends it as a compute location (the location is the order's innermost loop,
:class:`~heronlike.template.Ordered` ``pick=-1``), so the capacity constraints (C5) and compute
locations (C4) stay exact; :attr:`~heronlike.space.Space.nests` lists the level in its default
order.
"""

from __future__ import annotations

from collections.abc import Sequence

from heronlike.template import Choice, Ordered, Sym

from .base import Loop, Rule, RuleContext

ROLE_ORDER = ("m", "n", "k")


class MultiLevelTiling(Rule):
    """Condition: a stage with data reuse (a reduction reading a buffer some spatial axis
    does not index) that is not tiled yet."""

    name = "MultiLevelTiling"

    def __init__(
        self,
        spatial: Sequence[str] = ("S0", "S1", "S2"),
        reduce: Sequence[str] = ("R0", "R1"),
        order: Sequence[str] = ("S0", "S1", "R0", "R1", "S2", "T"),
        attach_levels: Sequence[str] = ("S0", "S1"),
        vector_level: str | None = None,
        order_level: str | None = None,
        max_order: int = 4,
        stream_order: Sequence[str] | None = None,
    ) -> None:
        self.spatial, self.reduce = tuple(spatial), tuple(reduce)
        self.order, self.attach_levels = tuple(order), tuple(attach_levels)
        self.stream_order = tuple(stream_order) if stream_order is not None else None
        if self.stream_order is not None and sorted(self.stream_order) != sorted(self.order):
            raise ValueError(f"stream_order {self.stream_order} is no permutation of {self.order}")
        self.vector_level = vector_level
        self.order_level, self.max_order = order_level, max_order

    def _permuted(self, ctx: RuleContext, stage: str) -> tuple[list[Loop], Ordered | None]:
        """The ``order_level`` loops that keep their place (extent fixed to 1; beyond
        ``max_order``, the outermost ones) and the order knob over the rest (None if fewer
        than two can exceed 1)."""
        st = ctx.states[stage]
        if self.order_level is None:
            return [], None
        group = st.level(self.order_level)

        def can_exceed_one(lp: Loop) -> bool:
            if isinstance(lp.extent, int):
                return lp.extent > 1
            return max(ctx.csp.candidates(lp.extent)) > 1

        free = [lp for lp in group if can_exceed_one(lp)][-self.max_order :]
        if len(free) < 2:
            return group, None
        fixed = [lp for lp in group if lp not in free]
        return fixed, ctx.order_knobs(stage, free, f"order@{self.order_level}")

    def vector_axis(self, ctx: RuleContext, stage: str) -> str | None:
        """The axis that gets the vector level: the output's last axis, if it is a plain
        spatial axis of a stage no intrinsic runs (None otherwise or without a vector level)."""
        st = ctx.states[stage]
        if self.vector_level is None or st.match is not None or not st.stage.write.axes:
            return None
        last = st.stage.write.axes[-1]
        if last is None or st.stage.axis(last).kind != "S":
            return None
        return last

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.stage.has_data_reuse and not any(lp.level for lp in st.loops)

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        vector_axis = self.vector_axis(ctx, stage)
        order = self.order
        for loop in list(ctx.loops(stage)):
            levels = self.spatial if loop.kind == "S" else self.reduce
            tile = st.intrinsic_tile.get(loop.axis)
            fixed = {"T": tile} if tile else {}
            if loop.axis == vector_axis and self.vector_level is not None:
                levels = levels + (self.vector_level,)
                order = self.order + (self.vector_level,)
            ctx.split(stage, loop, levels + (("T",) if tile else ()), fixed)

        def nest(levels: Sequence[str]) -> list[Loop]:
            ordered: list[Loop] = []
            for level in levels:
                group = st.level(level)
                if level == "T" and st.match is not None:
                    roles = {st.match.m_axis: "m", st.match.n_axis: "n", st.match.k_axis: "k"}
                    group.sort(key=lambda lp: ROLE_ORDER.index(roles[lp.axis]))
                ordered += group
            return ordered

        ordered = nest(order)
        if self.stream_order is not None and st.streams_operand:
            pick = ctx.csp.var(
                f"{stage}.stream",
                0,
                1,
                knob=True,
                doc="0: the register micro-kernel order, 1: the streaming order",
            )
            orders = (ordered, nest(self.stream_order))
            ctx.step("reorder", Choice(pick, tuple(tuple(Sym(lp.sym) for lp in o) for o in orders)))
            # the levels later rules look up are the same in both orders
            st.loops = ordered + [lp for lp in st.loops if lp not in ordered]
        else:
            ctx.reorder(stage, ordered)
        knob: Ordered | None = None
        if self.order_level is not None:
            fixed, knob = self._permuted(ctx, stage)
            if knob is not None:  # a second reorder of the level's loops, in the knob's order
                ctx.step("reorder", (*(Sym(lp.sym) for lp in fixed), knob))
                st.extra[f"order@{self.order_level}"] = knob  # for rules that attach below it

        def location(level: str) -> Loop | Ordered:
            if knob is not None and level == self.order_level:
                return Ordered(knob.positions, knob.options, pick=-1)
            return st.level(level)[-1]

        if st.write_back is not None:
            candidates = [location(lv) for lv in self.attach_levels if st.level(lv)]
            sizes = []
            for lv in self.attach_levels:
                tiles = [ctx.inner_extent(stage, ax, lv) for ax in st.stage.write.axes if ax]
                sizes.append(ctx.product(f"{stage}.write_back@{lv}.elems", tiles))
            ctx.attach(stage, st.write_back, candidates, "write_back", sizes)
        for block, buffer, levels in st.cached_reads:
            access = next(r for r in st.stage.reads if r.buffer == buffer)
            names = [lv for lv in levels if st.level(lv)]
            candidates = [location(lv) for lv in names]
            sizes = []
            for lv in names:
                tiles = [ctx.inner_extent(stage, ax, lv) for ax in access.axes if ax]
                sizes.append(ctx.product(f"{stage}.{block.name}@{lv}.elems", tiles))
            ctx.attach(stage, block, candidates, block.name, sizes, op="compute_at")
