"""Add-Cache-Stage (Ansor Table 2): accumulate an output tile in a local buffer.

A stage with data reuse that is an output (no consumer it could fuse into) computes into a
cache buffer in ``scope``; the write-back block copies the tile to the output and is attached
at a tiling level chosen by a knob (C4 AddStageFuse) by
:class:`~heronlike.rules.tiling.MultiLevelTiling`.

With ``streamed=False`` a tensorized stage that streams an operand
(:attr:`~heronlike.rules.base.StageState.streams_operand`: a matrix-vector product) keeps
its output as the accumulator, for :class:`~heronlike.rules.tiling.MultiLevelTiling`'s
``stream_order`` (with the copy, LLVM keeps the tile in registers in the micro-kernel order
whichever order the schedule gives). No target uses it: such a kernel updates its output in
memory at every ``R0`` step, and ran up to 3x slower when the output and the vector shared a
4 KiB page offset (docs/results.md, "Matrix-vector products: the streaming order, measured and
left off").
"""

from __future__ import annotations

from .base import Rule, RuleContext


class AddCacheStage(Rule):
    """Condition: the stage has data reuse, is an output and has no write-back yet (and,
    with ``streamed=False``, streams no operand)."""

    name = "AddCacheStage"

    def __init__(self, scope: str = "global", streamed: bool = True) -> None:
        self.scope = scope
        self.streamed = streamed

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        if not self.streamed and st.streams_operand:
            return False
        return st.stage.has_data_reuse and st.stage.is_output and st.write_back is None

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        (st.write_back,) = ctx.step(
            "cache_write", ctx.block(stage), 0, self.scope, outs=[f"b_{stage}.write_back"]
        )
