"""Always-Inline (Ansor Table 2): inline element-wise producer stages into their consumers;
and its exception, :class:`MaterializeOperand`, for producers of a tensorized stage's operands.
"""

from __future__ import annotations

import math
from typing import Any

from heronlike.template import Sym

from .base import Rule, RuleContext


def feeds_intrinsic(ctx: RuleContext, stage: str) -> bool:
    """Whether ``stage`` writes the A or B operand of a stage mapped onto an intrinsic."""
    buffer = ctx.states[stage].stage.write.buffer
    return any(buffer in (m.a.buffer, m.b.buffer) for m in ctx.matches.values())


class AlwaysInline(Rule):
    """Condition: an injective stage that is not an output, has consumers, is not tensorized
    and does not produce an operand of a tensorized stage (inlining it there would turn the
    operand into an expression, which ``tensorize`` cannot match). Apply: ``compute_inline``.
    Ends the stage (nothing else to schedule)."""

    name = "AlwaysInline"

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        s = ctx.states[stage].stage
        return (
            s.is_injective
            and not s.is_output
            and not ctx.states[stage].inlined
            and stage not in ctx.matches
            and bool(ctx.dag.consumers(stage))
            and not feeds_intrinsic(ctx, stage)
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        ctx.step("compute_inline", ctx.block(stage))
        ctx.states[stage].inlined = True

    def next(self, ctx: RuleContext, stage: str) -> bool:
        return False


class MaterializeOperand(Rule):
    """Condition: an injective stage producing an operand of a tensorized stage (the zero
    padding ``Xp`` of a convolution, SCAN's generated triangular matrix).

    Apply: keep it a separate, root-level stage that writes the whole operand before the
    tensorized stage runs (its cost is inside the measured kernel), with its outer loops fused
    and ``parallel`` and its innermost loop vectorised to ``vector_bytes``. Chosen over
    ``compute_at`` into the tile loops because the tensorized block then reads a plain buffer
    with the layout the intrinsic expects, independent of the tile sizes; for a convolution the
    padded copy is ``O(N·H·W·CI)`` bytes against ``O(N·HO·WO·CO·CI·KH·KW)`` multiply-adds. Ends
    the stage.

    An operand of at most ``serial_max_bytes`` (SCAN's 16 × 256 matrix: 4 KiB) is written
    by one core, without the ``parallel`` launch, which costs more than the few hundred vector
    stores save (on an Emerald Rapids Xeon, 2 threads: S2's kernel 3.0 µs with its 4 KiB
    matrix serial against 4.0 µs parallel; S1's 64 KiB one 15.2 µs serial against 6.8 µs).

    With ``at_parallel_task``, an operand as large as the work (an implicit GEMM's im2col
    matrix, ``KH·KW`` times its input) is instead written inside the tensorized stage's
    ``parallel`` loop (``compute_at``, :func:`heronlike.template.materialize_at`): each task
    writes the rows it reads just before it reads them, so they stay in its core's cache and
    no separate pass over memory runs (on AMX, C2D1 about 10 % faster, same schedule).
    """

    name = "MaterializeOperand"

    def __init__(
        self,
        vector_bytes: int = 64,
        at_parallel_task: bool = False,
        serial_max_bytes: int = 16 * 1024,
    ) -> None:
        self.vector_bytes = vector_bytes
        self.at_parallel_task = at_parallel_task
        self.serial_max_bytes = serial_max_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            st.stage.is_injective
            and not st.stage.is_output
            and not st.inlined
            and feeds_intrinsic(ctx, stage)
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        write = ctx.states[stage].stage.write
        lanes = max(1, self.vector_bytes // write.itemsize)
        parallel = math.prod(write.shape) * write.itemsize > self.serial_max_bytes
        task = self._task_loop(ctx, stage) if self.at_parallel_task else None
        if task is None:
            ctx.step("parallelize_vectorize", ctx.block(stage), lanes, parallel)
            return
        # its own element-wise producers (the zero padding of an im2col matrix) are inlined
        # first, as AlwaysInline would later: compute_at needs them out of the way. Without
        # one (a 1x1 convolution's reshape, SCAN's generated matrix) TVM 0.27's compute_at
        # fails after the consumer was tensorized, so those stay root-level passes
        inlined = False
        for producer in ctx.dag.producers(stage):
            st = ctx.states.get(producer)
            if st is not None and st.stage.is_injective and not st.inlined:
                if ctx.dag.consumers(producer) == [stage] and not st.stage.is_output:
                    ctx.step("compute_inline", ctx.block(producer))
                    st.inlined = inlined = True
        if inlined:
            ctx.step("materialize_at", ctx.block(stage), Sym(task.sym), lanes)
        else:
            ctx.step("parallelize_vectorize", ctx.block(stage), lanes, parallel)

    @staticmethod
    def _task_loop(ctx: RuleContext, stage: str) -> Any:
        """The parallel loop (level ``P``) of the one tensorized stage reading ``stage``, or
        None."""
        consumers = ctx.dag.consumers(stage)
        if len(consumers) != 1 or consumers[0] not in ctx.matches:
            return None
        loops = ctx.states[consumers[0]].level("P")
        return loops[0] if loops else None

    def next(self, ctx: RuleContext, stage: str) -> bool:
        return False
