"""C5 AddMemLimit (Heron ASPLOS'23 Table 8): bytes live in each memory level fit its capacity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from heronlike.csp import Le, Operand, Sum

from .base import ConstraintRule, RuleContext


@dataclass(frozen=True)
class Footprint:
    """Which buffers live in one memory level, and under which tiling level.

    ``memory``: a :class:`~heronlike.target.MemoryLevel` name of the target; ``below``: the
    tiling level whose one iteration's working set must fit (e.g. ``"R0"``: everything one
    iteration of the outer reduction loop touches); ``outputs_only``: count only the written
    buffer (accumulators held in registers); ``reserve_bytes``: capacity kept free (operand
    registers).
    """

    memory: str
    below: str
    outputs_only: bool = False
    reserve_bytes: int = 0


class AddMemLimit(ConstraintRule):
    """C5 AddMemLimit: per buffer, its tile's bytes (PROD of the tile extents of the axes that
    index it, times the element size); per memory level, the SUM over every buffer live there
    plus a reserve is LE the level's capacity. Dtype-aware and summed over buffers, unlike the
    original Heron, which bounded each buffer separately and assumed fp16."""

    name = "C5.AddMemLimit"

    def __init__(self, footprints: Sequence[Footprint]) -> None:
        self.footprints = tuple(footprints)

    def constrain(self, ctx: RuleContext) -> None:
        for stage_name, st in ctx.states.items():
            if not any(lp.level for lp in st.loops):
                continue  # untiled stage: nothing to bound
            for fp in self.footprints:
                level = ctx.target.memory_level(fp.memory)
                if level is None:
                    continue
                accesses = [st.stage.write] + ([] if fp.outputs_only else list(st.stage.reads))
                terms: list[Operand] = []
                coeffs: list[int] = []
                for acc in accesses:
                    tiles = [
                        ctx.inner_extent(stage_name, ax, fp.below)
                        for ax in acc.axes
                        if ax is not None
                    ]
                    size = 1
                    for d in acc.shape:
                        size *= d
                    elems = ctx.product(
                        f"{stage_name}.{acc.buffer}@{fp.below}.elems", tiles, upper=size
                    )
                    terms.append(elems)
                    coeffs.append(acc.itemsize)
                hi = sum(
                    c * (t if isinstance(t, int) else ctx.csp.vars[t].hi)
                    for c, t in zip(coeffs, terms)
                )
                total = ctx.csp.var(
                    f"{stage_name}.{fp.memory}.bytes",
                    0,
                    hi + fp.reserve_bytes,
                    doc=f"bytes live in {fp.memory} per iteration of {fp.below}",
                )
                if fp.reserve_bytes:
                    terms.append(fp.reserve_bytes)
                    coeffs.append(1)
                ctx.csp.add(Sum(total, tuple(terms), tuple(coeffs)))
                ctx.csp.add(Le(total, level.capacity_bytes))
