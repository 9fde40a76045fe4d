"""Parallelise the outer tile, unroll the register tile and choose an unroll depth (Heron's
CPU ``parallel`` and ``unrollPragma`` rules)."""

from __future__ import annotations

from collections.abc import Sequence

from heronlike.csp import In, Le
from heronlike.template import Ref, Sym

from .base import ConstraintRule, Rule, RuleContext


class ParallelizeOuter(Rule):
    """Condition: the stage has spatial loops at the outermost tiling level (``S0``).
    Apply: fuse them into one loop ``P`` (C2 AddLoopFuse) and mark it ``parallel``."""

    name = "ParallelizeOuter"

    def __init__(self, level: str = "S0") -> None:
        self.level = level

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        return bool(ctx.states[stage].level(self.level))

    def apply(self, ctx: RuleContext, stage: str) -> None:
        outer = ctx.states[stage].level(self.level)
        fused = ctx.fuse(stage, outer, "P") if len(outer) > 1 else outer[0]
        fused.level = "P"
        ctx.annotate_loop("parallel", fused)


class UnrollRegisterTile(Rule):
    """Condition: the stage has a register tile level (``S2``). Apply: ``unroll`` each of its
    loops so the accumulators stay in registers (bounded by C5 on the ``register`` level)."""

    name = "UnrollRegisterTile"

    def __init__(self, level: str = "S2") -> None:
        self.level = level

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        return bool(ctx.states[stage].level(self.level))

    def apply(self, ctx: RuleContext, stage: str) -> None:
        for loop in ctx.states[stage].level(self.level):
            ctx.annotate_loop("unroll", loop)


class UnrollDepth(Rule):
    """Condition: the stage has a parallel loop (``P``, from :class:`ParallelizeOuter`) and no
    unroll-depth knob yet. Apply: a categorical knob ``<stage>.unroll`` over ``depths`` (IN),
    set as the loop's ``pragma_auto_unroll_max_step`` with ``pragma_unroll_explicit``: TVM's
    unroll pass then fully unrolls every inner loop nest of constant extent up to that many
    iterations (Heron's ``unrollPragma``; MetaSchedule's ``ParallelizeVectorizeUnroll``, whose
    CPU default depths are these). 0 leaves the loops as they are.

    Args:
        depths: the candidate depths, in iterations.
    """

    name = "UnrollDepth"

    def __init__(self, depths: Sequence[int] = (0, 16, 64, 512), level: str = "P") -> None:
        self.depths, self.level = tuple(depths), level

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return bool(st.level(self.level)) and self.name not in st.applied

    def apply(self, ctx: RuleContext, stage: str) -> None:
        loop = ctx.states[stage].level(self.level)[0]
        unroll_knob(ctx, stage, Sym(loop.sym), self.depths)


def unroll_knob(ctx: RuleContext, stage: str, loop: Sym, depths: Sequence[int]) -> str:
    """Add the categorical knob ``<stage>.unroll`` over ``depths`` (IN) and annotate ``loop``
    (a parallel loop) with it as ``pragma_auto_unroll_max_step`` and with
    ``pragma_unroll_explicit`` (see :class:`UnrollDepth`). Returns the knob's name."""
    knob = ctx.csp.var(
        f"{stage}.unroll",
        min(depths),
        max(depths),
        knob=True,
        doc="pragma_auto_unroll_max_step of the parallel loop (iterations)",
        topology="categorical",
    )
    ctx.csp.add(In(knob, tuple(depths)))
    ctx.step("annotate", loop, "pragma_auto_unroll_max_step", Ref(knob))
    ctx.step("annotate", loop, "pragma_unroll_explicit", 1)
    return knob


class UseAllCores(ConstraintRule):
    """C6 AddDLASpecific (parallelism): the parallel loop has at least ``min(cores, possible)``
    iterations, ``possible`` being the most the shape allows, so no core idles needlessly."""

    name = "C6.UseAllCores"

    def constrain(self, ctx: RuleContext) -> None:
        for st in ctx.states.values():
            for lp in st.loops:
                if lp.level != "P" or isinstance(lp.extent, int):
                    continue
                possible = 1
                for axis in lp.axis.split("+"):
                    tile = st.intrinsic_tile.get(axis, 1)
                    if not isinstance(tile, int):  # a shape knob: its smallest extent
                        tile = min(ctx.csp.candidates(tile))
                    possible *= st.stage.axis(axis).extent // tile
                ctx.csp.add(Le(min(ctx.target.cores, possible), lp.extent))
