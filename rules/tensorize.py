"""S1 Tensorize (Heron ASPLOS'23 Table 6): map a stage onto the target's intrinsic.

:class:`Tensorize` runs first on a matching stage: it records the match, fixes the innermost
split part of each intrinsic axis to the intrinsic's extent (C6) and, for intrinsics with a
packed B operand, re-lays the operand out as contiguous ``n × k`` tiles. :class:`ApplyIntrinsic`
runs last on the stage: it separates the reduction's initialisation (``decompose_reduction``,
vectorised) and replaces the innermost ``n × k`` sub-nest by the intrinsic (``tensorize``),
marking the calls that read a zero-padding stage for :mod:`heronlike.postproc` to skip.

A target that offers one instruction at several ``m × n`` shapes (AMX's tile shapes: a
:func:`~heronlike.intrinsic.shape_family` of more than one member) gets the shape as a knob:
``<stage>.intrinsic`` indexes the family, ``<stage>.intrin_m`` / ``<stage>.intrin_n`` are its
extents (SELECT), the intrinsic tile levels equal them (EQ) and ``tensorize`` picks the member.
:class:`RegisterTileBudget` bounds the matrix-tile registers the chosen member holds (SELECT
per operand role, SUM, LE), and :class:`AccumulateInTiles` (instead of :class:`ApplyIntrinsic`)
keeps an instruction group's accumulator in those registers across the whole reduction.
"""

from __future__ import annotations

from collections.abc import Sequence

from heronlike.csp import In, Le, Select, Sum
from heronlike.errors import UnsupportedShapeError
from heronlike.intrinsic import Intrinsic, shape_family
from heronlike.template import Choice, Ordered, PackedLayout, Sym

from .base import ConstraintRule, Rule, RuleContext
from .skip_padding import skip_padding

#: the operand roles an intrinsic's register tiles are counted by
TILE_ROLES = ("a", "b", "c")


def intrinsic_choice(ctx: RuleContext, stage: str) -> tuple[str, list[Intrinsic]] | None:
    """The knob choosing the stage's intrinsic shape and the family it indexes, or None when
    the stage has one intrinsic shape."""
    return ctx.states[stage].extra.get("intrinsic_choice")


class Tensorize(Rule):
    """Condition: the stage maps onto one of the target's intrinsics (see
    :func:`heronlike.intrinsic.match_intrinsic`).

    Args:
        shape_knob: make the intrinsic's shape a knob over its
            :func:`~heronlike.intrinsic.shape_family`: ``None`` (default) for one-instruction
            intrinsics only (instruction groups get theirs from the target's tiling rule, as
            TensorCore does), True also for groups (AMX's fill / compute / store).
    """

    name = "S1.Tensorize"

    def __init__(self, shape_knob: bool | None = None) -> None:
        self.shape_knob = shape_knob

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
        knob = self.shape_knob if self.shape_knob is not None else not intrin.group
        family = shape_family(ctx.target.intrinsics, intrin) if knob else []
        if len(family) > 1:
            self._shape_knob(ctx, stage, family)
        if intrin.pack_b:
            b = m.b
            pack_n, pack_k = intrin.packed_tile
            tiles = tuple(
                pack_n if ax == m.n_axis else pack_k if ax == m.k_axis else 1 for ax in b.axes
            )
            n_dim, k_dim = b.axes.index(m.n_axis), b.axes.index(m.k_axis)
            outer = None
            if intrin.pack_tile is not None:
                # tiles of k within one n block contiguous (AMX's B tile: 16 such 64-byte
                # rows): the outer dimensions ordered (others, n, k) whatever W's order
                order = (*(d for d in range(len(b.axes)) if d not in (n_dim, k_dim)), n_dim, k_dim)
                outer = None if order == tuple(range(len(b.axes))) else order
            layout = PackedLayout(tiles, (n_dim, k_dim), outer)
            packed = ctx.packed.get(b.buffer)  # by another tensorized stage that reads it
            if packed is None:
                ctx.step("transform_layout", ctx.block(stage), b.buffer, layout)
                if b.buffer in {p.name for p in ctx.dag.params}:
                    ctx.packed[b.buffer] = layout
            elif packed != layout:
                raise UnsupportedShapeError(
                    f"stages read weight {b.buffer} in two packed layouts ({packed} and {layout})"
                )

    @staticmethod
    def _shape_knob(ctx: RuleContext, stage: str, family: list[Intrinsic]) -> None:
        """The ``<stage>.intrinsic`` knob over ``family`` and the tile extents it selects."""
        st = ctx.states[stage]
        m = ctx.matches[stage]
        axes = {"m": m.m_axis, "n": m.n_axis}
        roles = tuple(r for r in ("m", "n") if axes[r] is not None)
        shape = shape_knob(ctx, stage, family, roles)
        for role in roles:
            st.intrinsic_tile[axes[role]] = f"{stage}.intrin_{role}"
        st.extra["intrinsic_choice"] = (shape, family)


def shape_knob(
    ctx: RuleContext, stage: str, family: Sequence[Intrinsic], roles: Sequence[str] = ("m", "n")
) -> str:
    """Declare the knob ``<stage>.intrinsic`` indexing ``family`` and, per role of ``roles``,
    the variable ``<stage>.intrin_<role>`` its member's extent (SELECT, IN); return the knob."""
    csp = ctx.csp
    shape = csp.var(
        f"{stage}.intrinsic",
        0,
        len(family) - 1,
        knob=True,
        doc="intrinsic shape: " + ", ".join(f"{i.m}x{i.n}x{i.k}" for i in family),
    )
    extents = {r: tuple(getattr(i, r) for i in family) for r in roles}
    names = {
        r: csp.var(f"{stage}.intrin_{r}", 1, max(extents[r]), doc=f"intrinsic {r}") for r in roles
    }
    for r in roles:
        csp.add(Select(names[r], shape, extents[r]))
    for r in roles:
        csp.add(In(names[r], tuple(sorted(set(extents[r])))))
    return shape


class ApplyIntrinsic(Rule):
    """Condition: the stage was matched by :class:`Tensorize` and has been tiled.

    ``vector_lanes_bytes`` is the vector register width used to vectorise the reduction's
    initialisation and the write-back of the accumulator tile (64 bytes for AVX-512).

    Where an operand is a zero-padding stage, the intrinsic's block is annotated for the
    postprocessing to skip the calls that would read its padding
    (:func:`~heronlike.rules.skip_padding.skip_padding`).
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
        choice = intrinsic_choice(ctx, stage)
        name = (
            st.match.intrinsic.name
            if choice is None
            else Choice(choice[0], tuple(i.name for i in choice[1]))
        )
        (tile,) = ctx.step("blockize", Sym(st.level("T")[0].sym), outs=[f"{block}.tile"])
        ctx.step("tensorize", tile, name)
        skip_padding(ctx, stage, tile, (st.match.a.buffer, st.match.b.buffer))
        if st.write_back is not None:
            ctx.step("vectorize_innermost", st.write_back, lanes)


class AccumulateInTiles(Rule):
    """Condition: the stage was tiled ``... S1 R0 R1 T`` (no register level: the intrinsic's
    tile is the register tile) and its intrinsic is a group with ``"fill"`` and ``"store"``
    members whose accumulator lives in matrix registers (AMX tiles): scope ``scopes["c"]``.

    Apply: the accumulator of one intrinsic tile is cached in that scope at the innermost
    ``S1`` loop (``cache_write`` + ``reverse_compute_at``), so it stays in the tile registers
    across the whole reduction below: the reduction's initialisation becomes the ``fill``
    member (zero the accumulator tiles), each step of ``R0 R1`` the compute member (load A and
    B tiles, multiply-accumulate), the copy out of the cache the ``store`` member (into the
    stage's write-back buffer, whose copy to the output is vectorised). This is oneDNN's
    batch-reduce GEMM structure for AMX: per step of ``k`` reduction values (one tile row: 64
    int8 or 32 bf16), ``a + b`` tile loads feed ``a · b`` tile products, and C moves once per
    tile.

    Args:
        vector_bytes: vector register width for the write-back copy (64: AVX-512).
    """

    name = "S1.AccumulateInTiles"

    def __init__(self, vector_bytes: int = 64) -> None:
        self.vector_bytes = vector_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            st.match is not None
            and {"fill", "store"} <= set(st.match.intrinsic.group)
            and bool(st.level("T"))
            and bool(st.level("S1"))
            and self.name not in st.applied
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        assert st.match is not None
        st.applied.append(self.name)
        choice = intrinsic_choice(ctx, stage)
        family = [st.match.intrinsic] if choice is None else choice[1]

        def member(role: str) -> str | Choice:
            names = tuple(i.name if role == "compute" else i.group[role] for i in family)
            return names[0] if choice is None else Choice(choice[0], names)

        block = ctx.block(stage)
        order = st.extra.get("order@S1")
        innermost = (
            Ordered(order.positions, order.options, pick=-1)
            if order is not None
            else Sym(st.level("S1")[-1].sym)
        )
        scope = st.match.intrinsic.scopes.get("c", "local")
        (tiles,) = ctx.step("cache_write_at", block, scope, innermost, outs=[f"b_{stage}.tiles"])
        first_reduce = next(lp for lp in st.loops if lp.kind == "R")
        (init,) = ctx.step(
            "decompose_reduction", block, Sym(first_reduce.sym), outs=[f"{block}.init"]
        )
        ctx.step("tensorize_last", init, 2, member("fill"))
        ctx.step("tensorize", Sym(st.level("T")[0].sym), member("compute"))
        ctx.step("tensorize_last", tiles, 2, member("store"))
        if st.write_back is not None:
            lanes = self.vector_bytes // st.stage.write.itemsize
            ctx.step("vectorize_innermost", st.write_back, lanes)


class RegisterTileBudget(ConstraintRule):
    """C5 AddMemLimit for a register file of matrix tiles (AMX: 8 tile registers): the tiles
    the stage's intrinsic holds, ``a + b + c`` by :attr:`Intrinsic.register_tiles`, are at most
    ``budget``. With a shape knob each count is a SELECT over the family; a family member that
    needs more tiles than the file has is then never sampled.

    Args:
        budget: tile registers available to one call.
    """

    name = "C5.RegisterTileBudget"

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def constrain(self, ctx: RuleContext) -> None:
        csp = ctx.csp
        for stage, st in ctx.states.items():
            if st.match is None:
                continue
            choice = intrinsic_choice(ctx, stage)
            family = [st.match.intrinsic] if choice is None else choice[1]
            if not any(i.register_tiles for i in family):
                continue
            counts = []
            for role in TILE_ROLES:
                per_member = tuple(int(i.register_tiles.get(role, 0)) for i in family)
                var = csp.var(f"{stage}.tiles_{role}", 0, max(per_member), doc=f"{role} tiles")
                if choice is None:
                    csp.add(In(var, per_member))
                else:
                    csp.add(Select(var, choice[0], per_member))
                counts.append(var)
            total = csp.var(f"{stage}.tiles", 0, self.budget, doc="matrix tile registers")
            csp.add(Sum(total, tuple(counts)))
            csp.add(Le(total, self.budget))
