"""Multi-Level-Tiling (Ansor Table 2; Heron's ``generalTile``): the ``SSRSRS`` structure.

Every spatial axis is split into ``S0 S1 S2`` and every reduce axis into ``R0 R1``; an axis the
intrinsic covers gets one more, innermost part ``T`` fixed to the intrinsic's extent. Loops are
reordered ``S0 S1 R0 S2 R1 T``: ``S0`` is the parallel level, ``S1`` the cache tile, ``S2`` the
register tile (accumulators stay in registers across ``R1``) and ``T`` the intrinsic. A
write-back stage from :class:`~heronlike.rules.cache_stage.AddCacheStage` is attached under
``S0`` or ``S1``, chosen by a knob (C4 AddStageFuse).

With ``vector_level`` (the general rule set), a stage that no intrinsic runs gets one more,
innermost spatial level on its output's contiguous (last) axis, ordered after everything
else (``S0 S1 R0 S2 R1 V``, MetaSchedule's ``SSRSRS`` for CPUs), for
:class:`~heronlike.rules.general.VectorizeGeneral` to vectorise. Tensorized stages are tiled
exactly as without it.
"""

from __future__ import annotations

from collections.abc import Sequence

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
        order: Sequence[str] = ("S0", "S1", "R0", "S2", "R1", "T"),
        attach_levels: Sequence[str] = ("S0", "S1"),
        vector_level: str | None = None,
    ) -> None:
        self.spatial, self.reduce = tuple(spatial), tuple(reduce)
        self.order, self.attach_levels = tuple(order), tuple(attach_levels)
        self.vector_level = vector_level

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
        ordered: list[Loop] = []
        for level in order:
            group = st.level(level)
            if level == "T" and st.match is not None:
                roles = {st.match.m_axis: "m", st.match.n_axis: "n", st.match.k_axis: "k"}
                group.sort(key=lambda lp: ROLE_ORDER.index(roles[lp.axis]))
            ordered += group
        ctx.reorder(stage, ordered)
        if st.write_back is not None:
            candidates = [st.level(lv)[-1] for lv in self.attach_levels if st.level(lv)]
            sizes = []
            for lv in self.attach_levels:
                tiles = [ctx.inner_extent(stage, ax, lv) for ax in st.stage.write.axes if ax]
                sizes.append(ctx.product(f"{stage}.write_back@{lv}.elems", tiles))
            ctx.attach(stage, st.write_back, candidates, "write_back", sizes)
        for block, buffer, levels in st.cached_reads:
            access = next(r for r in st.stage.reads if r.buffer == buffer)
            names = [lv for lv in levels if st.level(lv)]
            candidates = [st.level(lv)[-1] for lv in names]
            sizes = []
            for lv in names:
                tiles = [ctx.inner_extent(stage, ax, lv) for ax in access.axes if ax]
                sizes.append(ctx.product(f"{stage}.{block.name}@{lv}.elems", tiles))
            ctx.attach(stage, block, candidates, block.name, sizes, op="compute_at")
