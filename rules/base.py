"""Rule engine: Heron's Algorithm 1 over a compute DAG, and the context rules write into.

A schedule rule (:class:`Rule`) has a ``condition`` and an ``apply`` (Heron ASPLOS'23 §4.1,
Table 6, Algorithm 1); ``apply`` appends schedule primitives to the template and declares CSP
variables and constraints, nothing else. Stages are visited output-first; on each stage the
rules are tried in order, and a rule whose :meth:`Rule.next` is False ends the stage.

The :class:`RuleContext` offers the primitives rules use (``split``, ``fuse``, ``reorder``,
``attach`` …). Each of them emits its constraints through the constraint rules of Heron Table 8
(:mod:`heronlike.rules.constraints`): a split emits C1 AddLoopSplit and C3 AddCandidates, a
fuse C2 AddLoopFuse, a compute location C4 AddStageFuse. Global constraint rules
(:class:`ConstraintRule`: C5 AddMemLimit, C6 AddDLASpecific) run once after all stages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from heronlike.csp import CSP, Operand
from heronlike.dag import ComputeDAG, Stage
from heronlike.intrinsic import IntrinsicMatch
from heronlike.template import Choice, Ordered, PackedLayout, Ref, Step, Sym, Template

from . import constraints as C

if TYPE_CHECKING:  # pragma: no cover
    from heronlike.target import DLATarget


@dataclass
class Loop:
    """A loop of a stage's current nest: its template symbol, the axis it iterates, its extent
    (a CSP variable name or a constant) and its tiling level (e.g. ``"S0"``, ``"R1"``, ``"T"``;
    ``""`` when untiled)."""

    sym: str
    axis: str
    kind: str
    extent: Operand
    level: str = ""


@dataclass
class StageState:
    """What the rules have done to one stage so far."""

    stage: Stage
    block: Sym | None = None
    loops: list[Loop] = field(default_factory=list)
    match: IntrinsicMatch | None = None
    inlined: bool = False
    write_back: Sym | None = None
    #: operands staged in scratchpads: (cache block, buffer, tiling levels it may be computed at)
    cached_reads: list[tuple[Sym, str, tuple[str, ...]]] = field(default_factory=list)
    #: intrinsic tile per axis, fixed innermost split part (axis -> extent, or the variable
    #: of a shape knob)
    intrinsic_tile: dict[str, Operand] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    #: what one rule leaves for a later rule of the same target (e.g. the knob choosing an
    #: intrinsic group's shape), by key
    extra: dict[str, Any] = field(default_factory=dict)

    def level(self, name: str) -> list[Loop]:
        return [lp for lp in self.loops if lp.level == name]

    @property
    def streams_operand(self) -> bool:
        """The stage runs an intrinsic one of whose operands no output tile reuses
        (:attr:`~heronlike.dag.Stage.streamed_reads`: the matrix of a matrix-vector
        product), so its register tile reuses only the other operand."""
        if self.match is None:
            return False
        operands = {self.match.a.buffer, self.match.b.buffer}
        return any(b in operands for b in self.stage.streamed_reads)


class RuleContext:
    """Template, CSP and per-stage state shared by the rules of one compute and target."""

    def __init__(self, dag: ComputeDAG, target: DLATarget) -> None:
        self.dag = dag
        self.target = target
        self.csp = CSP()
        self.template = Template(dag.func)
        self.states = {s.name: StageState(s) for s in dag.stages}
        #: layouts of function parameters that the kernel expects pre-packed (name -> layout)
        self.packed: dict[str, PackedLayout] = {}
        #: parameters the kernel may take re-laid out (pre-packed once by the caller): the
        #: PrimFunc attribute ``layout_free_buffers`` (parameter indices, as TVM's
        #: ``relax.transform.AttachAttrLayoutFreeBuffers`` sets it for a model's constant
        #: weights); every parameter when the attribute is absent (a compute given alone)
        self.layout_free = _layout_free(dag.func)
        self.matches: dict[str, IntrinsicMatch] = {m.stage.name: m for m in target.match(dag)}
        #: the extent of every loop bound to a thread axis, by axis (``"threadIdx.y"`` ->
        #: extents, one per stage that binds it); read by thread-limit constraint rules
        self.threads: dict[str, list[Operand]] = {}
        self._rule = ""

    def may_pack(self, buffer: str) -> bool:
        """Whether a rule may give parameter ``buffer`` a packed layout (:attr:`layout_free`)."""
        return self.layout_free is None or buffer in self.layout_free

    # -- bookkeeping -----------------------------------------------------------------------------
    def step(self, op: str, *args: Any, outs: Sequence[str] = ()) -> tuple[Sym, ...]:
        return self.template.add(Step(op, tuple(args), tuple(outs), self._rule))

    def block(self, stage: str) -> Sym:
        """The stage's block symbol (``get_sblock`` on first use)."""
        st = self.states[stage]
        if st.block is None:
            (st.block,) = self.step("get_sblock", stage, outs=[f"b_{stage}"])
        return st.block

    def loops(self, stage: str) -> list[Loop]:
        """The stage's current loops (``get_loops`` on first use), outer to inner."""
        st = self.states[stage]
        if not st.loops:
            blk = self.block(stage)
            names = [f"{stage}.{a.name}" for a in st.stage.axes]
            syms = self.step("get_loops", blk, outs=names)
            st.loops = [Loop(s.name, a.name, a.kind, a.extent) for s, a in zip(syms, st.stage.axes)]
        return st.loops

    # -- primitives with their constraints -------------------------------------------------------
    def split(
        self, stage: str, loop: Loop, levels: Sequence[str], fixed: dict[str, Operand]
    ) -> list[Loop]:
        """Split ``loop`` into one loop per level, outer to inner.

        Each level's extent is a new knob, except the levels in ``fixed`` (e.g. ``{"T": 16}``
        for an intrinsic tile, or ``{"T": "C.wmma_m"}`` for a tile chosen by another
        variable), whose variable is pinned by C6 AddDLASpecific (EQ). Emits C1 AddLoopSplit
        (PROD) and C3 AddCandidates (IN divisors).
        """
        st = self.states[stage]
        parts: list[str] = []
        for lv in levels:
            name = f"{stage}.{loop.axis}.{lv}"
            hi = loop.extent if isinstance(loop.extent, int) else self.csp.vars[loop.extent].hi
            self.csp.var(name, 1, hi, knob=lv not in fixed, doc=f"extent of {loop.axis} at {lv}")
            parts.append(name)
            if lv in fixed:
                C.add_dla_specific(self.csp, name, fixed[lv])
        C.add_loop_split(self.csp, loop.extent, parts)
        if isinstance(loop.extent, int):
            for name, lv in zip(parts, levels):
                if lv not in fixed:
                    C.add_candidates(self.csp, name, C.divisors(loop.extent))
        syms = self.step(
            "split", Sym(loop.sym), tuple(Ref(p) for p in parts), outs=[f"{p}" for p in parts]
        )
        new = [Loop(s.name, loop.axis, loop.kind, p, lv) for s, p, lv in zip(syms, parts, levels)]
        i = st.loops.index(loop)
        st.loops[i : i + 1] = new
        return new

    def reorder(self, stage: str, order: Sequence[Loop]) -> None:
        st = self.states[stage]
        self.step("reorder", tuple(Sym(lp.sym) for lp in order))
        st.loops = list(order) + [lp for lp in st.loops if lp not in order]

    def order_knobs(self, stage: str, loops: Sequence[Loop], name: str) -> Ordered:
        """A loop-order knob over ``loops``: one position knob per loop (values ``1 .. n``,
        ``topology="perm:<stage>.<name>"``), constrained to a permutation with the six kinds
        only: SUM of positions ``== n(n+1)/2`` and PROD ``== n!`` (for ``n <= 7`` only the
        permutations of ``1 .. n`` satisfy both), plus IN ``1 .. n``. Returns the
        :class:`~heronlike.template.Ordered` to splice into a ``reorder`` step.

        Raises:
            ValueError: for fewer than 2 or more than 7 loops.
        """
        n = len(loops)
        if not 2 <= n <= 7:
            raise ValueError(f"a loop-order knob needs 2..7 loops, got {n}")
        group = f"{stage}.{name}"
        names = []
        for lp in loops:
            names.append(
                self.csp.var(
                    f"{group}.{lp.axis}",
                    1,
                    n,
                    knob=True,
                    doc=f"position of {lp.sym} in the {name} loop order",
                    topology=f"perm:{group}",
                )
            )
            C.add_candidates(self.csp, names[-1], tuple(range(1, n + 1)))
        C.add_permutation(self.csp, names)
        return Ordered(tuple(names), tuple(Sym(lp.sym) for lp in loops))

    def fuse(self, stage: str, loops: Sequence[Loop], name: str) -> Loop:
        """Fuse adjacent ``loops`` into one; emits C2 AddLoopFuse (its extent is a PROD)."""
        st = self.states[stage]
        var = self.csp.var(
            f"{stage}.{name}", 1, _upper(self.csp, [lp.extent for lp in loops]), doc="fused extent"
        )
        C.add_loop_fuse(self.csp, var, [lp.extent for lp in loops])
        (sym,) = self.step("fuse", tuple(Sym(lp.sym) for lp in loops), outs=[f"{stage}.{name}"])
        fused = Loop(sym.name, "+".join(lp.axis for lp in loops), loops[0].kind, var, name)
        i = st.loops.index(loops[0])
        st.loops[i : i + len(loops)] = [fused]
        return fused

    def bind(self, loop: Loop, thread_axis: str) -> None:
        """Bind ``loop`` to a GPU thread axis (``"blockIdx.x"``, ``"threadIdx.y"`` ...) and
        record its extent in :attr:`threads`, where thread-limit constraint rules find it.
        Every loop bound to one axis in one kernel must have the same extent; the rules that
        bind say so with an EQ."""
        self.step("bind", Sym(loop.sym), thread_axis)
        self.threads.setdefault(thread_axis, []).append(loop.extent)

    def annotate_loop(self, op: str, loop: Loop) -> None:
        """``parallel`` / ``vectorize`` / ``unroll`` on one loop."""
        self.step(op, Sym(loop.sym))

    def attach(
        self,
        stage: str,
        block: Sym,
        candidates: Sequence[Loop | Ordered],
        what: str,
        sizes: Sequence[Operand],
        op: str = "reverse_compute_at",
    ) -> str:
        """Compute ``block`` at one of ``candidates`` (``reverse_compute_at`` for a consumer,
        ``compute_at`` for a producer), chosen by a new knob; emits C4 AddStageFuse: the
        attached tile's size is SELECTed from ``sizes``. A candidate may be an
        :class:`~heronlike.template.Ordered` with ``pick=-1``: the innermost loop of a level
        whose order a knob chooses (the tile below it is the same whatever the order)."""
        pos = self.csp.var(
            f"{stage}.{what}.pos",
            0,
            len(candidates) - 1,
            knob=True,
            doc=f"compute location of {what}: " + ", ".join(map(_loop_text, candidates)),
        )
        size = self.csp.var(f"{stage}.{what}.elems", 1, _upper(self.csp, sizes, mode="max"))
        C.add_stage_fuse(self.csp, size, pos, sizes)
        syms = tuple(c if isinstance(c, Ordered) else Sym(c.sym) for c in candidates)
        self.step(op, block, Choice(pos, syms))
        return size

    def product(self, name: str, factors: Sequence[Operand], upper: int | None = None) -> Operand:
        """A derived variable equal to the product of ``factors`` (a constant if all are)."""
        if all(isinstance(f, int) for f in factors):
            out = 1
            for f in factors:
                out *= int(f)
            return out
        if name in self.csp.vars:
            return name
        hi = upper if upper is not None else _upper(self.csp, factors)
        self.csp.var(name, 1, hi)
        C.add_loop_fuse(self.csp, name, factors)
        return name

    def loops_below(self, stage: str, below: str) -> list[Loop]:
        """``stage``'s loops nested inside its last ``below``-level loop, outermost first
        (all of its loops when it has no loop of that level)."""
        loops = self.states[stage].loops
        group = [i for i, lp in enumerate(loops) if lp.level == below]
        return list(loops[(group[-1] + 1) if group else 0 :])

    def inner_extent(self, stage: str, axis: str, below: str) -> Operand:
        """The extent of ``axis`` covered by one iteration of the last ``below``-level loop:
        the product of that axis's loops nested inside it (a CSP variable or constant)."""
        st = self.states[stage]
        inner = [lp.extent for lp in self.loops_below(stage, below) if lp.axis == axis]
        full = st.stage.axis(axis).extent
        if not inner:
            return 1
        return self.product(f"{stage}.{axis}@{below}", inner, upper=full)

    def with_rule(self, name: str) -> RuleContext:
        self._rule = name
        return self


def _loop_text(c: Loop | Ordered) -> str:
    return str(c) if isinstance(c, Ordered) else c.sym


def _upper(csp: CSP, ops: Sequence[Operand], mode: str = "prod") -> int:
    vals = [op if isinstance(op, int) else csp.vars[op].hi for op in ops]
    if mode == "max":
        return max(vals)
    out = 1
    for v in vals:
        out *= v
    return out


class Rule(ABC):
    """A schedule-generation rule (Heron Table 6 / Ansor Table 2)."""

    name: ClassVar[str] = ""

    @abstractmethod
    def condition(self, ctx: RuleContext, stage: str) -> bool:
        """Whether the rule applies to ``stage`` now."""

    @abstractmethod
    def apply(self, ctx: RuleContext, stage: str) -> None:
        """Append primitives to ``ctx.template`` and constraints to ``ctx.csp``."""

    def next(self, ctx: RuleContext, stage: str) -> bool:
        """Whether later rules may still apply to ``stage`` (Algorithm 1's ``next``)."""
        return True


class ConstraintRule(ABC):
    """A global constraint rule, run once after every stage is scheduled (Heron Table 8)."""

    name: ClassVar[str] = ""

    @abstractmethod
    def constrain(self, ctx: RuleContext) -> None:
        """Add variables and constraints to ``ctx.csp``."""


def _layout_free(func: Any) -> set[str] | None:
    attrs = func.attrs
    if attrs is None or "layout_free_buffers" not in attrs:
        return None
    return {func.params[int(i)].name for i in attrs["layout_free_buffers"]}


def generate(
    ctx: RuleContext, rules: Sequence[Rule], constraint_rules: Sequence[ConstraintRule]
) -> None:
    """Heron's Algorithm 1: visit stages output-first, apply each applicable rule in order."""
    for stage in ctx.dag.post_order():
        for rule in rules:
            ctx.with_rule(rule.name)
            if rule.condition(ctx, stage):
                rule.apply(ctx, stage)
                ctx.states[stage].applied.append(rule.name)
                if not rule.next(ctx, stage):
                    break
    for crule in constraint_rules:
        ctx.with_rule(crule.name)
        crule.constrain(ctx)
    ctx.with_rule("")
