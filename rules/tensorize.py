"""S1 Tensorize (Heron ASPLOS'23 Table 6): map a stage onto the target's intrinsic.

:class:`Tensorize` runs first on a matching stage: it records the match, fixes the innermost
split part of each intrinsic axis to the intrinsic's extent (C6) and, for intrinsics with a
packed B operand, re-lays the operand out as contiguous ``n × k`` tiles. :class:`ApplyIntrinsic`
runs last on the stage: it separates the reduction's initialisation (``decompose_reduction``,
vectorised) and replaces the innermost ``n × k`` sub-nest by the intrinsic (``tensorize``).
"""

from __future__ import annotations

from heronlike.template import PackedLayout, Sym

from .base import Rule, RuleContext


class Tensorize(Rule):
    """Condition: the stage maps onto one of the target's intrinsics (see
    :func:`heronlike.intrinsic.match_intrinsic`)."""

    name = "S1.Tensorize"

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        return stage in ctx.matches and ctx.states[stage].match is None

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        m = ctx.matches[stage]
        st.match = m
        intrin = m.intrinsic
        st.intrinsic_tile = {m.n_axis: intrin.n, m.k_axis: intrin.k}
        if m.m_axis is not None:
            st.intrinsic_tile[m.m_axis] = intrin.m
        if intrin.pack_b:
            b = m.b
            tiles = tuple(
                intrin.n if ax == m.n_axis else intrin.k if ax == m.k_axis else 1 for ax in b.axes
            )
            layout = PackedLayout(tiles, (b.axes.index(m.n_axis), b.axes.index(m.k_axis)))
            ctx.step("transform_layout", ctx.block(stage), b.buffer, layout)
            if b.buffer in {p.name for p in ctx.dag.params}:
                ctx.packed[b.buffer] = layout


class ApplyIntrinsic(Rule):
    """Condition: the stage was matched by :class:`Tensorize` and has been tiled.

    ``vector_lanes_bytes`` is the vector register width used to vectorise the reduction's
    initialisation and the write-back of the accumulator tile (64 bytes for AVX-512).
    """

    name = "S1.ApplyIntrinsic"

    def __init__(self, vector_bytes: int = 64) -> None:
        self.vector_bytes = vector_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.match is not None and bool(st.level("T"))

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        assert st.match is not None
        block = ctx.block(stage)
        lanes = self.vector_bytes // st.stage.write.itemsize
        first_reduce = next(lp for lp in st.loops if lp.kind == "R")
        (init,) = ctx.step(
            "decompose_reduction", block, Sym(first_reduce.sym), outs=[f"{block}.init"]
        )
        ctx.step("vectorize_innermost", init, lanes)
        ctx.step("tensorize", Sym(st.level("T")[0].sym), st.match.intrinsic.name)
        if st.write_back is not None:
            ctx.step("vectorize_innermost", st.write_back, lanes)
