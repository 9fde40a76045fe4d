"""Add-Cache-Stage (Ansor Table 2): accumulate an output tile in a local buffer.

A stage with data reuse that is an output (no consumer it could fuse into) computes into a
cache buffer in ``scope``; the write-back block copies the tile to the output and is attached
at a tiling level chosen by a knob (C4 AddStageFuse) by
:class:`~heronlike.rules.tiling.MultiLevelTiling`.
"""

from __future__ import annotations

from .base import Rule, RuleContext


class AddCacheStage(Rule):
    """Condition: the stage has data reuse, is an output and has no write-back yet."""

    name = "AddCacheStage"

    def __init__(self, scope: str = "global") -> None:
        self.scope = scope

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.stage.has_data_reuse and st.stage.is_output and st.write_back is None

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        (st.write_back,) = ctx.step(
            "cache_write", ctx.block(stage), 0, self.scope, outs=[f"b_{stage}.write_back"]
        )
