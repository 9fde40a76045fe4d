"""Parallelise the outer tile and unroll the register tile (Heron's CPU ``parallel`` and
``unrollPragma`` rules)."""

from __future__ import annotations

from heronlike.csp import Le

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
                    possible *= st.stage.axis(axis).extent // st.intrinsic_tile.get(axis, 1)
                ctx.csp.add(Le(min(ctx.target.cores, possible), lp.extent))
