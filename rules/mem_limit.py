"""C5 AddMemLimit (Heron ASPLOS'23 Table 8): bytes live in each memory level fit its capacity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from heronlike.csp import Le, Operand, Sum
from heronlike.dag import Access

from .base import ConstraintRule, RuleContext


@dataclass(frozen=True)
class Footprint:
    """Which buffers live in one memory level, and under which tiling level.

    ``memory``: a :class:`~heronlike.target.MemoryLevel` name of the target; ``below``: the
    tiling level whose one iteration's working set must fit (e.g. ``"R0"``: everything one
    iteration of the outer reduction loop touches); ``outputs_only``: count only the written
    buffer (accumulators held in registers); ``reserve_bytes``: capacity kept free (operand
    registers). ``vector_level`` and ``vector_bytes``: in a stage with loops of that level
    (the general rule set's ``V``), the written buffer is counted in whole vector registers of
    ``vector_bytes``: one per point of its other loops below ``below``, however few lanes the
    vector loop fills (a 2-wide float32 vector loop still takes one register per
    accumulator, not 8 bytes of one).
    """

    memory: str
    below: str
    outputs_only: bool = False
    reserve_bytes: int = 0
    vector_level: str | None = None
    vector_bytes: int = 0


def _dim_footprint(ctx: RuleContext, stage: str, acc: Access, dim: int, below: str) -> Operand:
    """How many distinct indices of dimension ``dim`` of ``acc`` one iteration of ``below``
    touches: the tile extent of a plain axis; for an affine index ``sum(c_i * x_i) + const``
    (a convolution's ``h*s + rh*d``) the sound upper bound ``sum(|c_i| * (t_i - 1)) + 1`` as a
    SUM variable; the full dimension when the index is not affine or not recorded."""
    axis = acc.axes[dim]
    if axis is not None:
        return ctx.inner_extent(stage, axis, below)
    index = acc.index[dim] if acc.index else None
    if index is None:
        return acc.shape[dim]
    terms: list[Operand] = []
    coeffs: list[int] = []
    const = 1
    for ax, c in index.terms:
        tile = ctx.inner_extent(stage, ax, below)
        terms.append(tile)
        coeffs.append(abs(c))
        const -= abs(c)
    if all(isinstance(t, int) for t in terms):
        return sum(c * int(t) for c, t in zip(coeffs, terms)) + const
    name = f"{stage}.{acc.buffer}.d{dim}@{below}"
    if name not in ctx.csp.vars:
        hi = sum(
            c * (t if isinstance(t, int) else ctx.csp.vars[t].hi) for c, t in zip(coeffs, terms)
        )
        ctx.csp.var(name, 1, max(1, hi + const), doc=f"footprint of {acc.buffer} dim {dim}")
        ctx.csp.add(Sum(name, tuple(terms) + (const,), tuple(coeffs) + (1,)))
    return name


class AddMemLimit(ConstraintRule):
    """C5 AddMemLimit: per buffer, its tile's bytes (PROD of the per-dimension footprints of
    its tile, times the element size; a compound index such as ``h*s + rh*d`` counts
    ``(tile_h - 1)*s + (tile_rh - 1)*d + 1``, never less than what is touched); per memory
    level, the SUM over every buffer live there plus a reserve is LE the level's capacity.
    Dtype-aware and summed over buffers, unlike the original Heron, which bounded each buffer
    separately and assumed fp16."""

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
                    vectors = self._vectors(ctx, stage_name, acc, fp)
                    if vectors is not None:
                        terms.append(vectors)
                        coeffs.append(fp.vector_bytes)
                        continue
                    tiles = [
                        _dim_footprint(ctx, stage_name, acc, d, fp.below)
                        for d in range(len(acc.shape))
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

    @staticmethod
    def _vectors(ctx: RuleContext, stage: str, acc: Access, fp: Footprint) -> Operand | None:
        """The vector registers ``acc`` (the written buffer) takes below ``fp.below``, counted
        per :class:`Footprint`'s ``vector_level``; None when it is not counted that way."""
        st = ctx.states[stage]
        if (
            not fp.vector_level
            or acc is not st.stage.write
            or not any(lp.level == fp.vector_level for lp in st.loops)
        ):
            return None
        axes = {ax for ax in acc.axes if ax}
        inner = [
            lp.extent
            for lp in ctx.loops_below(stage, fp.below)
            if lp.axis in axes and lp.level != fp.vector_level
        ]
        size = 1
        for d in acc.shape:
            size *= d
        return ctx.product(f"{stage}.{acc.buffer}@{fp.below}.vectors", inner, upper=size)
