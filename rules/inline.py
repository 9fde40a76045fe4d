"""Always-Inline (Ansor Table 2): inline element-wise producer stages into their consumers."""

from __future__ import annotations

from .base import Rule, RuleContext


class AlwaysInline(Rule):
    """Condition: an injective stage that is not an output, has consumers and is not
    tensorized. Apply: ``compute_inline``. Ends the stage (nothing else to schedule)."""

    name = "AlwaysInline"

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        s = ctx.states[stage].stage
        return (
            s.is_injective
            and not s.is_output
            and stage not in ctx.matches
            and bool(ctx.dag.consumers(stage))
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        ctx.step("compute_inline", ctx.block(stage))
        ctx.states[stage].inlined = True

    def next(self, ctx: RuleContext, stage: str) -> bool:
        return False
