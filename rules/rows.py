"""Row-wise stages of the general rule set: reductions without data reuse (softmax's max and
sum, layer norm's moments, a row sum) and the element-wise stages between them.

Multi-level tiling does not apply to such a reduction (it reads each input element once), and
left alone it runs serially at the root of the kernel. Two rules schedule it:

* :class:`FuseIntoRow`: when the stage's consumers are all computed row by row under the
  parallel outer loop of one element-wise output stage (:class:`~heronlike.rules.general.
  ScheduleInjective`, which fuses the output's leading axes into that loop), and each reads
  the stage at the same leading indices, the stage is computed at that loop too
  (``compute_at``): one row's max, exponentials, sum and result are computed together by one
  core while the row is in its cache, with no redundant work. An element-wise stage that calls
  an expensive operator (``exp``, ``log`` …) and has several consumers is kept (computed once
  per row, vectorised) instead of being inlined into each consumer, as MetaSchedule's
  ``AutoInline(disallow_op=["tirx.exp"])`` does.
* :class:`ParallelizeReduction`: otherwise, a reduction without data reuse gets its spatial
  loops fused into one ``parallel`` loop (a reduction to a scalar stays serial).

Either way the reduction's innermost loop, when it is at least two vectors long, is vectorised
through ``rfactor`` (:func:`heronlike.template.row_reduction`): a serial float reduction is
bound by the latency of one add per element, a vectorised one is not. How many partial results
run side by side is a knob, ``<stage>.rf`` (:func:`rfactor_width`). One vector register of
them is still bound by the latency of one vector add per register of input (on a Zen 3,
3 cycles per 8 floats: about a third of a 256 × 1024 layer norm's time, which 4 to 8
registers saved); 2 to 8 registers are independent chains the core overlaps, at the cost of a
longer final reduction of the partial results (as the inner factor of MetaSchedule's
``AddRFactor``, sampled up to 64 elements there). Its values divide the loop and leave it at
least two iterations, so every value is a valid program. The element-wise output whose row
loop these stages share has its own knobs (vector width, unroll depth:
:class:`~heronlike.rules.general.ScheduleInjective`).
"""

from __future__ import annotations

from heronlike.csp import Operand
from heronlike.template import Ref, Sym

from . import constraints as C
from .base import Rule, RuleContext

#: operators whose element-wise stage is computed once per row rather than inlined into
#: several consumers
EXPENSIVE_CALLS = frozenset(
    {"tirx.exp", "tirx.exp2", "tirx.log", "tirx.tanh", "tirx.erf", "tirx.sigmoid", "tirx.pow"}
)

ROW = "row"  # StageState.extra key: (symbol of the parallel row loop, number of leading axes)

#: the widest ``rfactor`` tried, in vector registers of partial results
MAX_RF_VECTORS = 8


def rfactor_width(
    ctx: RuleContext, stage: str, lanes: int, max_vectors: int = MAX_RF_VECTORS
) -> Operand:
    """How many partial results the ``rfactor`` of a reduction without data reuse keeps (the
    ``lanes`` argument of :func:`heronlike.template.row_reduction`).

    The candidates are ``lanes · 2^i`` (one to ``max_vectors`` vector registers) that divide
    the extent ``E`` of the stage's innermost loop, a reduction axis, and are at most ``E / 2``
    (so the helper always factors: two or more iterations remain). With two or more
    candidates this is a new knob ``<stage>.rf`` (IN the candidates); with one, that constant;
    with none (a short, odd or spatial innermost loop), ``lanes``, for which the helper keeps
    the reduction serial as before.

    Args:
        lanes: elements of the output dtype in one vector register.
        max_vectors: the widest candidate, in vector registers.

    Returns:
        The knob's name or a constant.
    """
    last = ctx.states[stage].stage.axes[-1]
    if last.kind != "R":
        return lanes
    widths = []
    w = lanes
    while w <= lanes * max_vectors:
        if last.extent % w == 0 and last.extent >= 2 * w:
            widths.append(w)
        w *= 2
    if len(widths) < 2:
        return widths[0] if widths else lanes
    knob = ctx.csp.var(
        f"{stage}.rf",
        min(widths),
        max(widths),
        knob=True,
        doc=f"partial results of the rfactor of {last.name} (vectorised)",
    )
    C.add_candidates(ctx.csp, knob, widths)
    return knob


def _ref(op: Operand) -> int | Ref:
    return op if isinstance(op, int) else Ref(op)


def set_row(ctx: RuleContext, stage: str, loop: Sym, leading: int) -> None:
    """Record that ``stage`` is computed under the parallel loop ``loop`` of its output's
    first ``leading`` axes (read by :class:`FuseIntoRow` on its producers)."""
    ctx.states[stage].extra[ROW] = (loop, leading)


def row_of(ctx: RuleContext, stage: str) -> tuple[Sym, int] | None:
    """The row loop every consumer of ``stage`` is computed under, if they share one and each
    reads ``stage`` at its own leading indices (so computing ``stage`` under it is exact, not
    redundant); None otherwise."""
    s = ctx.states[stage].stage
    consumers = ctx.dag.consumers(stage)
    rows = {ctx.states[c].extra.get(ROW) for c in consumers}
    if not consumers or len(rows) != 1 or None in rows:
        return None
    ((loop, leading),) = rows
    if len(s.axes) < leading or any(a.kind != "S" for a in s.axes[:leading]):
        return None
    own = tuple(a.name for a in s.axes[:leading])
    if s.write.axes[:leading] != own:
        return None
    for c in consumers:
        cs = ctx.states[c].stage
        reads = [r for r in cs.reads if r.buffer == s.write.buffer]
        lead = tuple(a.name for a in cs.axes[:leading])
        if len(reads) != 1 or reads[0].axes[:leading] != lead or len(cs.axes) < leading:
            return None
    return loop, leading


class FuseIntoRow(Rule):
    """Condition: a stage that is not an output, not tiled, not tensorized, and either a
    reduction without data reuse or an element-wise stage calling an expensive operator with
    several consumers, whose consumers share one row loop (:func:`row_of`). Apply:
    ``compute_at`` that loop; an element-wise stage's innermost loop is vectorised (split to
    one vector register), a reduction's through ``rfactor``
    (:func:`heronlike.template.row_reduction`) to a knob-chosen number of partial results
    (:func:`rfactor_width`). Ends the stage.

    Args:
        vector_bytes: vector register width in bytes.
    """

    name = "FuseIntoRow"

    def __init__(self, vector_bytes: int = 64) -> None:
        self.vector_bytes = vector_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        s = st.stage
        if s.is_output or st.inlined or st.loops or stage in ctx.matches:
            return False
        if s.is_reduction:
            wanted = not s.has_data_reuse
        else:
            wanted = bool(EXPENSIVE_CALLS & set(s.calls)) and len(ctx.dag.consumers(stage)) > 1
        return wanted and row_of(ctx, stage) is not None

    def apply(self, ctx: RuleContext, stage: str) -> None:
        row = row_of(ctx, stage)
        assert row is not None
        block = ctx.block(stage)
        set_row(ctx, stage, *row)
        s = ctx.states[stage].stage
        lanes = max(1, self.vector_bytes // s.write.itemsize)
        if s.is_reduction:
            width = rfactor_width(ctx, stage, lanes)
            ctx.step("row_reduction", block, row[0], _ref(width))
        else:
            ctx.step("compute_at", block, row[0])
            ctx.step("vectorize_innermost", block, lanes)

    def next(self, ctx: RuleContext, stage: str) -> bool:
        return False


class ParallelizeReduction(Rule):
    """Condition: a reduction without data reuse that nothing else scheduled (not tiled, not
    fused into a row, not inlined). Apply: fuse its spatial loops (outermost, in TE's order;
    none for a reduction to a scalar) into one ``parallel`` loop, its innermost reduction
    vectorised by ``rfactor`` where it is long enough
    (:func:`heronlike.template.row_reduction`; partial results: :func:`rfactor_width`).

    Args:
        vector_bytes: vector register width in bytes.
    """

    name = "ParallelizeReduction"

    def __init__(self, vector_bytes: int = 64) -> None:
        self.vector_bytes = vector_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        s = st.stage
        return (
            s.is_reduction
            and not s.has_data_reuse
            and not st.inlined
            and not st.loops
            and ROW not in st.extra
            and stage not in ctx.matches
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        lanes = max(1, self.vector_bytes // ctx.states[stage].stage.write.itemsize)
        width = rfactor_width(ctx, stage, lanes)
        ctx.step("row_reduction", ctx.block(stage), None, _ref(width))
