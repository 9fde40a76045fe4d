"""Parallelise the outer tile, unroll the register tile and choose an unroll depth (Heron's
CPU ``parallel`` and ``unrollPragma`` rules)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from heronlike.csp import CSP, In, Le, Operand, Prod, Select
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
    iterations, ``possible`` being the most the shape allows, so no core idles needlessly;
    and, where the shape allows it, a *balanced* number: TVM's thread pool gives each core
    ``ceil(P / cores)`` of the ``P`` iterations, so ``P / (cores * ceil(P / cores))`` of the
    cores' time does work (3 iterations on 2 cores: 75 %). The extents that the loop's split
    factors can give are enumerated and those below ``min_balance`` are left out (IN); when
    no extent the shape allows is balanced, none is left out.

    A stage of at most ``serial_max_ops`` operations (2 per multiply-add, the product of its
    axis extents times 2) also gets the categorical knob ``<stage>.serial``: 1 runs it on one
    core (the parallel loop has exactly one iteration, and a one-iteration ``parallel`` loop is
    replayed as a plain one, :meth:`heronlike.template.Template.apply`), 0 on all cores as above
    (SELECTs on the loop's lower and upper bounds). Launching a parallel region costs about half
    a microsecond on TVM's thread pool (measured on a 512 × 16 GEMV: 0.69 µs on 2 cores, 0.16 µs
    on one), more than a few thousand operations take on one core; MetaSchedule drops the
    ``parallel`` of such stages the same way (its parallel loop of extent 1).

    Args:
        serial_max_ops: the largest stage, in operations, that may run serially (default 2**20:
            about 1 µs on one core at VNNI's peak, where splitting it over cores saves about
            what the launch costs; larger stages keep the space they had, without a knob that
            would send half of the random samples to one core).
        min_balance: the least fraction of the cores' time a parallel extent may keep busy
            (default 0.9: on 2 cores, any even extent or an odd one of 9 or more).
    """

    name = "C6.UseAllCores"

    def __init__(self, serial_max_ops: int = 1 << 20, min_balance: float = 0.9) -> None:
        self.serial_max_ops = serial_max_ops
        self.min_balance = min_balance

    def constrain(self, ctx: RuleContext) -> None:
        cores = ctx.target.cores
        for stage, st in ctx.states.items():
            for lp in st.loops:
                if lp.level != "P" or isinstance(lp.extent, int):
                    continue
                possible = 1
                for axis in lp.axis.split("+"):
                    tile = st.intrinsic_tile.get(axis, 1)
                    if not isinstance(tile, int):  # a shape knob: its smallest extent
                        tile = min(ctx.csp.candidates(tile))
                    possible *= st.stage.axis(axis).extent // tile
                need = min(cores, possible)
                ops = 2 * math.prod(a.extent for a in st.stage.axes)
                serial = need > 1 and ops <= self.serial_max_ops
                if serial:
                    self._serial_knob(ctx, stage, lp.extent, need)
                else:
                    ctx.csp.add(Le(need, lp.extent))
                values = extent_values(ctx.csp, lp.extent, ctx.csp.vars[lp.extent].hi)
                if values is None or need <= 1:
                    continue
                parallel = [v for v in values if v >= need]
                balanced = [v for v in parallel if balance(v, cores) >= self.min_balance]
                if balanced and len(balanced) < len(parallel):
                    keep = sorted(balanced + ([1] if serial else []))
                    ctx.csp.add(In(lp.extent, tuple(keep)))

    @staticmethod
    def _serial_knob(ctx: RuleContext, stage: str, extent: str, need: int) -> None:
        serial = ctx.csp.var(
            f"{stage}.serial",
            0,
            1,
            knob=True,
            doc="1: one core (no parallel launch), 0: all cores",
            topology="categorical",
        )
        hi = ctx.csp.vars[extent].hi
        low = ctx.csp.var(f"{stage}.P.min", 1, need, doc="least parallel iterations")
        high = ctx.csp.var(f"{stage}.P.max", 1, hi, doc="most parallel iterations")
        ctx.csp.add(Select(low, serial, (need, 1)))
        ctx.csp.add(Select(high, serial, (hi, 1)))
        ctx.csp.add(Le(low, extent))
        ctx.csp.add(Le(extent, high))


#: :class:`SplitAxisNotInnermost`'s default largest stage, in operations (67 M: about 31 µs on
#: two Zen 5 cores at VNNI's peak; the walks cost C2D2 about 13 µs a call with its cores far)
SPLIT_AXIS_MAX_OPS = 1 << 26


class SplitAxisNotInnermost(ConstraintRule):
    """C6 AddDLASpecific (threads' blocks): in a stage of at most ``max_ops`` operations, an
    axis whose parallel (``S0``) part has more than one iteration is not walked by the
    innermost loop of the cache tile's order (``order@S1``, :mod:`heronlike.rules.tiling`)
    unless that loop has one iteration. Such an order walks the axis again and again up to
    the edge of the block a thread owns, and each walk ends where the other thread's block
    begins. On a 2-vCPU Zen 5 VM whose two cores are sometimes distant (a cache line's round
    trip 4x longer, ``benchmarks/peak.py``'s ``core_round_trip_ns``), C2D2 (a 56 x 56 1 x 1
    convolution, 13 µs) with its 28 output rows per thread walked innermost read 13.1 µs near
    and 26.7 µs far; the same tile with the rows walked outermost 12.8 and 14.1 µs, and D2
    alike (``benchmarks/core_distance.py``, docs/results.md "Walking the split axis
    innermost"). The cost is about a constant per call, so only small
    stages lose an order by it: larger ones keep every order their cache tiles may want.

    Encoded with the six kinds: ``w = SELECT(position, (1, …, 1, S1))`` is the axis's ``S1``
    extent when the loop is innermost (position ``n``) and 1 otherwise; ``cap =
    SELECT(S0, (hi, hi, 1, …, 1))`` is 1 when the ``S0`` part has 2 or more iterations;
    ``LE(w, cap)``.

    Args:
        max_ops: the largest stage (2 operations per multiply-add: twice the product of its
            axis extents) the rule constrains; 0 constrains none.
    """

    name = "C6.SplitAxisNotInnermost"

    def __init__(self, max_ops: int = SPLIT_AXIS_MAX_OPS) -> None:
        self.max_ops = max_ops

    def constrain(self, ctx: RuleContext) -> None:
        csp = ctx.csp
        for stage, st in ctx.states.items():
            order = st.extra.get("order@S1")
            if order is None or 2 * math.prod(a.extent for a in st.stage.axes) > self.max_ops:
                continue
            split = parallel_parts(ctx, stage)
            by_sym = {lp.sym: lp for lp in st.loops}
            n = len(order.positions)
            for position, sym in zip(order.positions, order.options, strict=True):
                lp = by_sym.get(sym.name)
                part = split.get(lp.axis) if lp is not None else None
                if lp is None or not isinstance(part, str) or isinstance(lp.extent, int):
                    continue  # no loop of the order, or an axis no parallel part splits
                hi_walk, hi_part = csp.vars[lp.extent].hi, csp.vars[part].hi
                if hi_part < 2 or hi_walk < 2:
                    continue
                walk = csp.var(f"{stage}.walk@S1.{lp.axis}", 1, hi_walk, doc="innermost S1 walk")
                cap = csp.var(f"{stage}.walk@S1.{lp.axis}.max", 1, hi_walk, doc="longest walk")
                csp.add(Select(walk, position, (1,) * n + (lp.extent,)))
                csp.add(Select(cap, part, (hi_walk, hi_walk) + (1,) * (hi_part - 1)))
                csp.add(Le(walk, cap))


def parallel_parts(ctx: RuleContext, stage: str) -> dict[str, Operand]:
    """Each axis of ``stage``'s parallel loop (``P``, fused by :class:`ParallelizeOuter`) and
    the extent of its part of that loop (a variable or a constant): the factors of the loop's
    C2 AddLoopFuse, in the order of the fused axes. Empty without a parallel loop."""
    for lp in ctx.states[stage].loops:
        if lp.level != "P":
            continue
        axes = lp.axis.split("+")
        if len(axes) == 1:
            return {axes[0]: lp.extent}
        for c in ctx.csp.constraints:
            if isinstance(c, Prod) and c.target == lp.extent and len(c.factors) == len(axes):
                return dict(zip(axes, c.factors, strict=True))
    return {}


def balance(extent: int, cores: int) -> float:
    """The fraction of ``cores``' time a parallel loop of ``extent`` iterations keeps busy when
    each core takes ``ceil(extent / cores)`` of them (TVM's static partition)."""
    return extent / (cores * math.ceil(extent / cores))


#: extents with more values than this are not enumerated (:func:`extent_values`)
_MAX_VALUES = 4096


def extent_values(csp: CSP, name: str, cap: int) -> set[int] | None:
    """Every value up to ``cap`` the loop extent ``name`` can take: a fused loop's (PROD)
    products of its factors' values, a split factor's IN candidates; None when some factor is
    not so bounded (a plain range) or there are more than ``_MAX_VALUES`` values."""
    for c in csp.constraints:
        if isinstance(c, Prod) and c.target == name:
            values = {1}
            for f in c.factors:
                fv = {f} if isinstance(f, int) else extent_values(csp, f, cap)
                if fv is None:
                    return None
                values = {a * b for a in values for b in fv if a * b <= cap}
                if len(values) > _MAX_VALUES:
                    return None
            return values
    if not any(isinstance(c, In) and c.var == name for c in csp.constraints):
        return None
    return set(csp.candidates(name))
