"""Postprocessing: rewrites of a scheduled program that no schedule primitive expresses.

A template (:mod:`heronlike.template`) ends as a ``tvm.s_tir.Schedule``; :func:`postprocess`
turns its module into the program that is built, measured and shipped, acting only on what the
schedule asked for through block annotations (TVM MetaSchedule's ``Postproc`` has the same
place: after the schedule, before the build). :meth:`heronlike.space.Space.program` applies it,
so tuning, :class:`~heronlike.kernel.BuiltKernel`, libraries and compiled models all build the
same program.

Three rewrites today. **Hoisting per-thread set-up** (:data:`THREAD_SETUP`,
:func:`hoist_thread_setup`): an intrinsic whose members need some per-thread state set once
(AMX: the tile configuration, ``ldtilecfg``) wraps that code in an ``AttrStmt`` with this key.
Every copy is taken out of the tensorized blocks, and one copy runs at the top of each parallel
loop's body (one task, one thread) or of the function. A micro-kernel that runs thousands of
times then configures the tiles once per task instead of once per call (on a Xeon with AMX,
one ``ldtilecfg`` per 64 ``tdpbusd`` cost 17 % of their throughput).

**Spreading a placement's zeros** (:data:`SPREAD_ZERO_STORES`, :func:`spread_zero_stores`). The
sub-pixel transposed convolution (T4, T6 of Heron's table) computes a product ``P`` and places
each product vector with the zeros around it, ``Y[i] = if_then_else(c, P[j], 0)``, at the
product's register tile (:class:`~rules.general.FuseEpilogue`): three quarters of its stores
are zeros, all issued in one burst after the tile's reduction, which fills the store queue and
stalls the next tile's multiply-accumulates while the lines are fetched for writing. Here the
zeros move to a block of their own (``Y_zeros``) inside the reduction's step loops, a chunk of
them per step, so they drain while the products are computed, and ``Y`` keeps the stores where
``c`` holds (``benchmarks/store_spread.py``: T4's finalists 1.18x faster by their geomean on a
Zen 4; a hand-written model of its tile recovers more than half of the zeros' cost this way,
almost none by chunks of 12 stores). TVM's ``decompose_padding`` makes such a block only for
some loop shapes of ``Y``, and no schedule primitive puts a block inside another's reduction
loop.

**Skipping the zero padding** (:data:`SKIP_ZERO_READS`). A convolution reads
its input through a zero-padding stage ``Xp[i] = if_then_else(inside(i), X[i - pad], 0)``, so
every multiply-accumulate whose ``Xp`` element lies in the padding adds zero: with kernel 3 and
pad 1, a depth of 2 wastes a third of the work on them (oneDNN skips them; a TIR reduction
cannot, its taps have constant bounds). A rule that knows a block is a sum of products of a
buffer (the DL Boost intrinsic rule, :class:`~heronlike.rules.tensorize.ApplyIntrinsic`)
annotates the block with the buffer's name and where guards may go (``outer``, or a knob
where the padding is a large share: :mod:`heronlike.rules.skip_padding`). Here each conjunct of
the padding condition (``1 <= od + kd``, ``od + kd < D + 1``, ...) is rewritten in the loop
variables of the block's read of that buffer and hoisted as an ``if`` just inside the innermost
loop it depends on, so a whole row of taps (and every intrinsic call under it) is skipped at
once. The result is equal to the unguarded program's, bit for bit (for floating point, unless
a weight is infinite or NaN). What it buys, one tuned schedule per case with and without the
guards: ``benchmarks/padding_skip.py``.

The same holds for any operand stage that is zero outside a region, ``T[i] =
if_then_else(c, x, 0)``: SCAN's generated lower-triangular matrix (``T[n, k] = k < n``) is
zero for every ``k >= n``, which with N = 16, K = 256 is 60 of the 64 intrinsic calls of a
row. Such a stage may be stored in a packed layout (``T[n // 16, k // 4, n % 16, k % 4]``
for VNNI): the block's reads are then mapped back to the stage's variables through the
inverse of that layout (``IndexMap.inverse``).

**Guards over what a guard cannot test.** A conjunct may depend on a variable no ``if`` can
sit inside: an offset within the operand tile one intrinsic call reads (a ``16 × 4`` tile of
the triangle), a vectorised lane, or (with ``outer`` guards) a row of the unrolled register
tile. The guard then tests whether the conjunct holds for *some* value of those variables:
``a < b`` becomes ``1 <= max(b - a)`` over their ranges (TVM's ``int_set``, exact for affine
conditions and an upper bound otherwise, so no non-zero read is ever skipped). A whole
call, or a whole tile of rows, is skipped where every element it reads is a zero; with pad
4 and dilation 2 (C1D3), the taps that read only padding for all four rows of a tile. A
relaxed guard that holds for every tile (any pad-1 convolution tiled two or more rows at a
time) is left out.

Where the padding stage was inlined into the block (the general rule set inlines it:
:class:`~heronlike.rules.general.VectorizeGeneral` annotates the update block), there is no
padding block: the condition is the block's own factor, its update being
``C[i] = C[i] + if_then_else(c, x, 0) * w`` (:func:`inline_zero_condition`).

**Interior and boundary versions.** A conjunct that depends on an unrolled loop (a row of the
register tile) can only be tested inside the unrolled code, where a branch per row costs more
than it skips: LLVM then cannot keep the tile's accumulators in registers across the reduction
loops (a store under a branch is not promoted). With ``all`` guards the loop nest is emitted
once per way its tiles read the padding (loop versioning, or index-set splitting, as oneDNN's
kernels specialise their boundary output positions; :func:`_row_versions`). The split sits
above the reduction loops the conjuncts depend on (a convolution's tap loops, at most
:data:`MAX_UNROLLED_TAPS` iterations), once per register tile. The conjuncts are evaluated at
every iteration of the loops above it, for every tap and row, and each distinct outcome gets a
version whose guards depend on those taps and rows alone, which it unrolls: each version is
then branch-free code without the (tap, row) pairs that read only padding, and the interior
version (no such pair) keeps its loops as they were. A 3 × 3 convolution over 14 rows tiled 7
at a time gets two versions: the first tile without row 0 at tap 0, the second without row 6
at tap 2. Where that fails (more than :data:`MAX_ROW_VERSIONS` outcomes, a loop of no constant
extent), the guards are those of ``outer``. (``boundary_version=False`` keeps the row guards in
the one loop nest, for comparison only.)

A conjunct is left out (the program stays correct, it only skips less) when it must be
relaxed but is no comparison, or depends on anything but loop variables; nothing is guarded
when the buffer's producer is not exactly one zero-padding block (nor inlined as above), its
layout is no bijection of its variables, or the annotated block still holds its reduction's
initialisation (skipping it would skip the initialisation too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.tirx.analysis import undefined_vars

SKIP_ZERO_READS = "heronlike.skip_zero_reads"
"""Block annotation ``"<where>:<buffer>,<buffer>..."``: buffers whose zero elements make the
block's update add nothing (the block computes ``C += f(A) * g(B)`` with one of its factors read
from each), and where guards may go (:data:`GUARD_PLACES`)."""

THREAD_SETUP = "heronlike.thread_setup"
"""``AttrStmt`` key an intrinsic implementation wraps its per-thread set-up in (module
docstring); the statement under it may allocate local buffers, and must be the same wherever it
appears in one program (else nothing is hoisted and each copy stays where it is)."""

SPREAD_ZERO_STORES = "heronlike.spread_zero_stores"
"""Block annotation (value 1) of a stage ``Y[i] = if_then_else(c, P[j], 0)`` computed at the tile
of the reduction that writes ``P`` (the sub-pixel transposed convolution's placement,
:class:`~rules.general.FuseEpilogue`): its zeros are stored between the reduction's steps
(:func:`spread_zero_stores`)."""

ZEROS_SUFFIX = "_zeros"
"""Suffix of the block :func:`spread_zero_stores` makes of a placement's zeros."""

BOUNDARY_SUFFIX = "_boundary"
"""Suffix of the blocks of the versions after the first that ``all`` guards make
(:data:`GUARD_PLACES`; numbered from the third: ``_boundary2``, ...)."""

GUARD_PLACES = ("outer", "all")
"""``outer``: a guard only outside every unrolled loop (around the register tile, whose unrolled
code stays branch-free); ``all``: also inside it, per unrolled row and tap, in one branch-free
version of the loop nest per way a tile reads the padding (module docstring), else as
``outer``. ``all`` skips more and can cost more than it saves, by schedule:
:mod:`heronlike.rules.skip_padding` decides when it is a knob."""


def postprocess(
    mod: tvm.IRModule, *, boundary_version: bool = True, spread_zeros: bool = True
) -> tvm.IRModule:
    """``mod`` with every PrimFunc rewritten as its block annotations ask (module docstring);
    ``mod`` itself when nothing asks for a rewrite. ``boundary_version=False`` keeps ``all``
    guards in one version of the loop nest (:func:`skip_zero_reads`), ``spread_zeros=False``
    a placement's zeros after the reduction (:func:`spread_zero_stores`); both for comparison
    only."""
    out = {}
    changed = False
    for gv, func in mod.functions.items():
        new = func
        if isinstance(func, tirx.PrimFunc):
            new = skip_zero_reads(func, boundary_version=boundary_version)
            new = spread_zero_stores(new) if spread_zeros else new
            new = hoist_thread_setup(new)
        changed = changed or not new.same_as(func)
        out[gv] = new
    return tvm.IRModule(out, attrs=mod.attrs) if changed else mod


def skip_zero_reads(func: tirx.PrimFunc, *, boundary_version: bool = True) -> tirx.PrimFunc:
    """``func`` with the padding reads of every :data:`SKIP_ZERO_READS` block guarded by ``if``
    statements hoisted to the loops they depend on (module docstring); ``func`` itself when
    there is nothing to guard. Guards under an unrolled loop (``all``) make one branch-free
    version of the loop nest per way a tile reads the padding, unless ``boundary_version`` is
    false (then they sit in the one loop nest; for comparison only)."""
    for name, place, buffers in skip_annotations(func):
        for buffer in buffers:
            func = _guard(func, name, buffer, place, boundary_version)
    return func


# ------------------------------------------------------------------------------------------------
# walking the statement tree (TVM 0.27 has no Python statement mutator: the few node kinds a
# scheduled program holds above its blocks are walked and rebuilt here)


def _children(stmt: Any) -> list[Any]:
    if isinstance(stmt, s_tir.SBlockRealize):
        return [stmt.block.body]
    if isinstance(stmt, tirx.For):
        return [stmt.body]
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, tirx.IfThenElse):
        return [s for s in (stmt.then_case, stmt.else_case) if s is not None]
    return []


def _realizes(stmt: Any) -> list[Any]:
    """Every block realize in ``stmt``, pre-order."""
    out: list[Any] = []
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, s_tir.SBlockRealize):
            out.append(s)
        stack.extend(reversed(_children(s)))
    return out


def skip_annotations(func: tirx.PrimFunc) -> list[tuple[str, str, list[str]]]:
    """``(block name, place, buffers)`` of every :data:`SKIP_ZERO_READS` annotation of
    ``func`` (a place of :data:`GUARD_PLACES`)."""
    out = []
    for realize in _realizes(func.body):
        value = str(realize.block.annotations.get(SKIP_ZERO_READS, ""))
        place, _, buffers = value.partition(":")
        if place in GUARD_PLACES and buffers:
            out.append((realize.block.name_hint, place, buffers.split(",")))
    return out


def with_guard_place(mod: tvm.IRModule, place: str) -> tvm.IRModule:
    """``mod`` (a scheduled module, before :func:`postprocess`) with every
    :data:`SKIP_ZERO_READS` annotation asking for guards at ``place`` (of
    :data:`GUARD_PLACES`), its buffers kept: the same schedule with its padding guards placed
    differently (``benchmarks/padding_skip.py`` builds each place of one tuned schedule).
    The old value is removed first: TVM 0.27's ``Schedule.annotate`` keeps a key's existing
    value, so annotating over it changes nothing.

    Raises:
        ValueError: ``place`` is not one of :data:`GUARD_PLACES`.
    """
    if place not in GUARD_PLACES:
        raise ValueError(f"unknown guard place {place!r}; expected one of {GUARD_PLACES}")
    sch = s_tir.Schedule(mod)
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        sch.work_on(gv.name_hint)
        for name, _, buffers in skip_annotations(func):
            block = sch.get_sblock(name)
            sch.unannotate(block, SKIP_ZERO_READS)
            sch.annotate(block, SKIP_ZERO_READS, f"{place}:{','.join(buffers)}")
    return sch.mod


def _path(stmt: Any, name: str) -> list[Any] | None:
    """The statements from ``stmt`` down to the realize of block ``name`` (inclusive)."""
    if isinstance(stmt, s_tir.SBlockRealize) and stmt.block.name_hint == name:
        return [stmt]
    for child in _children(stmt):
        rest = _path(child, name)
        if rest is not None:
            return [stmt, *rest]
    return None


def _with_child(stmt: Any, old: Any, new: Any, kind: Any = None) -> Any:
    """``stmt`` with its child ``old`` replaced by ``new`` (and, a loop, of ``kind`` if
    given)."""
    if isinstance(stmt, tirx.For):
        return tirx.For(
            stmt.loop_var, stmt.min, stmt.extent, stmt.kind if kind is None else kind, new,
            stmt.thread_binding, stmt.annotations, stmt.step,
        )  # fmt: skip
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([new if s.same_as(old) else s for s in stmt.seq])
    if isinstance(stmt, tirx.IfThenElse):
        then = new if stmt.then_case.same_as(old) else stmt.then_case
        other = stmt.else_case
        if other is not None and other.same_as(old):
            other = new
        return tirx.IfThenElse(stmt.condition, then, other)
    b = stmt.block
    return s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, _block(b, b.name_hint, new))


def _block(b: Any, name: str, body: Any) -> Any:
    """Block ``b`` with another name and body."""
    return s_tir.SBlock(
        b.iter_vars, b.reads, b.writes, name, body, b.init, b.alloc_buffers, b.match_buffers,
        b.annotations,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# per-thread set-up


def hoist_thread_setup(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every :data:`THREAD_SETUP` statement removed from where it is and one copy
    of it, in a block of its own, at the top of each parallel loop's body that held one (and
    of the function's body, for those under no parallel loop); ``func`` itself when it holds
    none, copies that differ, or one that reads a variable of where it is (a loop or block
    variable: it would not be defined at the top)."""
    found: list[Any] = []

    def strip(stmt: Any) -> tuple[Any, bool]:
        """``(stmt without set-up statements or None, whether one was removed below a
        non-parallel path)``."""
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == THREAD_SETUP:
            found.append(stmt.body)
            return None, True
        if isinstance(stmt, tirx.SeqStmt):
            parts, hit = [], False
            for s in stmt.seq:
                new, h = strip(s)
                hit |= h
                if new is not None:
                    parts.append(new)
            if len(parts) == len(stmt.seq) and all(a.same_as(b) for a, b in zip(parts, stmt.seq)):
                return stmt, False
            return _sequence(parts), hit
        children = _children(stmt)
        if len(children) != 1:  # leaves, and an if (never holds a tensorized block here)
            return stmt, False
        new, hit = strip(children[0])
        new = tirx.Evaluate(0) if new is None else new
        if hit and isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL:
            new, hit = _sequence([_setup_block(found[0]), new]), False
        if new.same_as(children[0]):
            return stmt, False
        return _with_child(stmt, children[0], new), hit

    body, outside = strip(func.body)
    if (
        not found
        or undefined_vars(found[0])
        or any(not _same_setup(found[0], f) for f in found[1:])
    ):
        return func
    if outside:
        if isinstance(body, s_tir.SBlockRealize):
            first = _sequence([_setup_block(found[0]), body.block.body])
            body = _with_child(body, body.block.body, first)
        else:
            body = _sequence([_setup_block(found[0]), body])
    return func.with_body(body)


def _same_setup(a: Any, b: Any) -> bool:
    """Whether two set-up statements do the same (their local buffers may differ)."""
    return bool(tvm_ffi.structural_equal(a, b, map_free_vars=True))


def _sequence(stmts: list[Any]) -> Any:
    return tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0] if stmts else tirx.Evaluate(0)


def _setup_block(body: Any) -> Any:
    block = s_tir.SBlock([], [], [], "thread_setup", body)
    return s_tir.SBlockRealize([], True, block)


# ------------------------------------------------------------------------------------------------
# a placement's zeros between the reduction's steps


def spread_zero_stores(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the zeros of every :data:`SPREAD_ZERO_STORES` block stored a few at a time
    between the steps of the reduction before it (module docstring); ``func`` itself where
    there is none, or a block's loops are not as :func:`_spread_zeros` needs them."""
    names = [
        r.block.name_hint
        for r in _realizes(func.body)
        if int(r.block.annotations.get(SPREAD_ZERO_STORES, 0))
    ]
    for name in names:
        func = _spread_zeros(func, name) or func
    return func


def _spread_zeros(func: tirx.PrimFunc, name: str) -> tirx.PrimFunc | None:
    """``func`` with block ``name`` (``Y[i] = if_then_else(c, P[j], 0)``) split in two: itself
    storing where ``c`` holds, and a block ``<name>_zeros`` storing the zeros, one chunk of its
    iterations in each step of the reduction loops of ``P``'s update just before it. None
    unless ``name``'s loops directly follow that loop nest in the same sequence, every loop
    above the block but a vectorised innermost one is serial or unrolled, all of constant
    extent from 0, and the reduction nest starts with serial loops of the reduction alone."""
    path = _path(func.body, name)
    if path is None:
        return None
    realize = path[-1]
    block, store = realize.block, realize.block.body
    call = store.value if isinstance(store, tirx.BufferStore) else None
    if not (
        isinstance(call, tvm.ir.Call)
        and str(call.op.name).endswith("if_then_else")
        and len(call.args) == 3
        and _is_zero(call.args[2])
        and isinstance(call.args[1], tvm.ir.expr.TensorLoad)
    ):
        return None
    cond, product = call.args[0], call.args[1]
    k = max((i for i, s in enumerate(path[:-1]) if isinstance(s, tirx.SeqStmt)), default=-1)
    loops = path[k + 1 : -1]
    if k < 0 or not loops or not all(_counted(lp) for lp in loops):
        return None
    vector = loops[-1] if loops[-1].kind == tirx.ForKind.VECTORIZED else None
    outer = loops[:-1] if vector is not None else loops
    if any(lp.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED) for lp in outer):
        return None
    seq = list(path[k].seq)
    at = next(i for i, s in enumerate(seq) if s.same_as(path[k + 1]))
    steps = _reduction_steps(seq[at - 1], product.source) if at > 0 else []
    if not steps:
        return None
    # iteration z of the zeros' outer loops runs in step z // chunk of the reduction
    count = math.prod(int(lp.extent) for lp in outer)
    n_steps = math.prod(int(lp.extent) for lp in steps)
    chunk = -(-count // n_steps)
    step = steps[0].loop_var
    for lp in steps[1:]:
        step = step * lp.extent + lp.loop_var
    j = tirx.Var("j", steps[0].loop_var.ty)
    z = step * chunk + j
    variables, values, stride = [], [], count
    for lp in outer:
        stride //= int(lp.extent)
        variables.append(lp.loop_var)
        values.append(tirx.floormod(tirx.floordiv(z, stride), lp.extent))
    lane = tirx.Var("lane", vector.loop_var.ty) if vector is not None else None
    if vector is not None:
        variables.append(vector.loop_var)
        values.append(lane)
    predicate = _substitute(realize.predicate, variables, values)
    if chunk * n_steps > count:
        predicate = tirx.And(predicate, z < count)
    annotations = {
        key: value for key, value in block.annotations.items() if key != SPREAD_ZERO_STORES
    }
    zero = tirx.BufferStore(store.buffer, call.args[2], store.indices)
    zeros_block = s_tir.SBlock(
        block.iter_vars, [], block.writes, f"{name}{ZEROS_SUFFIX}",
        tirx.IfThenElse(tirx.Not(cond), zero, None), None, [], [], annotations,
    )  # fmt: skip
    nest: Any = s_tir.SBlockRealize(
        [_substitute(v, variables, values) for v in realize.iter_values], predicate, zeros_block
    )
    if vector is not None:
        nest = tirx.For(lane, 0, vector.extent, tirx.ForKind.VECTORIZED, nest)
    nest = _fresh_copy(
        tirx.For(j, 0, chunk, tirx.ForKind.SERIAL, nest),
        [*path[: k + 1], *steps],
        k + 1 + len(steps),
        "",
    )
    node = _with_child(steps[-1], steps[-1].body, tirx.SeqStmt([steps[-1].body, nest]))
    for parent, child in zip(reversed(steps[:-1]), reversed(steps[1:])):
        node = _with_child(parent, child, node)
    seq[at - 1] = node
    products = s_tir.SBlock(
        block.iter_vars, block.reads, block.writes, name,
        tirx.IfThenElse(cond, tirx.BufferStore(store.buffer, product, store.indices), None),
        block.init, block.alloc_buffers, block.match_buffers, annotations,
    )  # fmt: skip
    node = s_tir.SBlockRealize(realize.iter_values, realize.predicate, products)
    for parent, child in zip(reversed(path[k + 1 : -1]), reversed(path[k + 2 :])):
        node = _with_child(parent, child, node)
    seq[at] = node
    node = tirx.SeqStmt(seq)
    for parent, child in zip(reversed(path[:k]), reversed(path[1 : k + 1])):
        node = _with_child(parent, child, node)
    new = func.with_body(node)
    return new if _well_formed(new) else None


def _counted(loop: Any) -> bool:
    """A loop from 0 of constant extent, bound to no thread."""
    return (
        isinstance(loop, tirx.For)
        and _is_zero(loop.min)
        and isinstance(loop.extent, tirx.IntImm)
        and loop.thread_binding is None
    )


def _reduction_steps(nest: Any, buffer: Any) -> list[Any]:
    """The serial loops ``nest`` starts with that step the reduction of the update block of
    ``buffer`` in ``nest`` (their variables in its reduction bindings alone), outermost first."""
    updates = [
        r
        for r in _realizes(nest)
        if any(w.source.same_as(buffer) for w in r.block.writes)
        and any(int(iv.iter_type) == tirx.IterVar.CommReduce for iv in r.block.iter_vars)
    ]
    reduce, spatial = [], []
    for r in updates:
        for iv, value in zip(r.block.iter_vars, r.iter_values, strict=True):
            kind = reduce if int(iv.iter_type) == tirx.IterVar.CommReduce else spatial
            kind.extend(undefined_vars(value))
    steps = []
    while (
        _counted(nest)
        and nest.kind == tirx.ForKind.SERIAL
        and any(v.same_as(nest.loop_var) for v in reduce)
        and not any(v.same_as(nest.loop_var) for v in spatial)
    ):
        steps.append(nest)
        nest = nest.body
    return steps


# ------------------------------------------------------------------------------------------------
# the padding condition


def _substitute(expr: Any, variables: Sequence[Any], values: Sequence[Any]) -> Any:
    """``expr`` with ``variables`` replaced by ``values`` (and simplified)."""
    if not variables:
        return expr
    return tirx.IndexMap(list(variables), [expr], None).map_indices(list(values))[0]


def conjuncts(expr: Any) -> list[Any]:
    """The operands of a chain of ``and`` (``a and b and c``: ``[a, b, c]``); ``[expr]`` when
    it is no ``and``."""
    if isinstance(expr, tirx.And):
        return conjuncts(expr.a) + conjuncts(expr.b)
    return [expr]


def zero_padding(func: tirx.PrimFunc, buffer: str) -> tuple[list[Any], Any] | None:
    """``(index variables, condition)`` of the one block of ``func`` writing ``buffer`` as
    ``buffer[v...] = if_then_else(condition, x, 0)`` (a zero-padding stage; also a stage that
    is zero outside a region, as a scan's lower-triangular ``T[n, k] = if_then_else(k < n, 1,
    0)``); None for any other producer, or none. When the stage's layout was transformed
    (``buffer[f(v)] = ...``, a packed weight layout) the variables are its block's."""
    found = _padding_block(func.body, buffer)
    return None if found is None else (found[1], found[2])


def zero_share(func: tirx.PrimFunc, buffer: str) -> float:
    """The share of ``buffer``'s elements that a zero-padding stage of ``func`` sets to zero:
    ``1 - source size / padded size`` when its block reads one buffer (the source; each of its
    elements copied once), else 0 (unknown). A depth-2, 14 × 14 input padded by 1 on each side
    is 62 % zeros; a 28 × 28 one 13 %."""
    found = _padding_block(func.body, buffer)
    if found is None:
        return 0.0
    sources = {r.source.name for r in found[0].reads}
    if len(sources) != 1:
        return 0.0
    (source,) = sources
    sizes = {b.name: math.prod(int(d) for d in b.shape) for b in _buffers(func)}
    padded, src = sizes.get(buffer), sizes.get(source)
    return max(0.0, 1.0 - src / padded) if padded and src else 0.0


def _buffers(func: tirx.PrimFunc) -> list[Any]:
    """The parameter buffers and every buffer a block allocates."""
    out = [p for p in func.params if hasattr(p, "shape")]
    for realize in _realizes(func.body):
        out += list(realize.block.alloc_buffers)
    return out


def _padding_block(body: Any, buffer: str) -> tuple[Any, list[Any], Any, Any] | None:
    """``(block, index variables, condition, inverse layout)`` of :func:`zero_padding`'s stage,
    or None. The inverse layout (a ``tirx.IndexMap`` from ``buffer``'s indices to the
    variables) is None when the stage stores at its variables themselves; else its store
    indices must be a bijection of its block variables (``transform_layout``'s packing)."""
    writers = [
        r.block for r in _realizes(body) if any(w.source.name == buffer for w in r.block.writes)
    ]
    if len(writers) != 1:
        return None
    store = writers[0].body
    if not isinstance(store, tirx.BufferStore):
        return None
    call = store.value
    while isinstance(call, tirx.Cast):  # a widened copy (rules/widen.py) casts the select
        call = call.value
    if not isinstance(call, tvm.ir.Call):
        return None
    if not str(call.op.name).endswith("if_then_else") or len(call.args) != 3:
        return None
    if not _is_zero(call.args[2]):
        return None
    block = writers[0]
    if all(isinstance(i, tirx.Var) for i in store.indices):
        return block, list(store.indices), call.args[0], None
    from tvm.sym.analyzer import Analyzer

    analyzer = Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    indices = [analyzer.simplify(i) for i in store.indices]  # (v0 * 16 + v2) // 16 is v0
    variables = [iv.var for iv in block.iter_vars]
    try:
        inverse = tirx.IndexMap(variables, indices, None).inverse(
            [iv.dom.extent for iv in block.iter_vars]
        )
    except Exception:  # noqa: BLE001 - TVM raises its own error types: not a bijection
        return None
    back = inverse.map_indices(indices)
    if len(back) != len(variables) or not all(
        analyzer.can_prove_equal(b, v) for b, v in zip(back, variables)
    ):
        return None
    return block, variables, call.args[0], inverse


def inline_zero_condition(block: Any) -> Any | None:
    """The condition ``c`` of a block whose body is ``C[i] = C[i] + f_1 * ... * f_n`` (casts
    allowed) with a factor ``if_then_else(c, x, 0)``: a zero-padding stage inlined into a
    multiply-accumulate (or a sum), whose update adds nothing where ``c`` is false; None for
    any other block."""
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return None
    a, b = store.value.a, store.value.b
    term = b if _loads_itself(a, store) else a if _loads_itself(b, store) else None
    for factor in _factors(term) if term is not None else []:
        if (
            isinstance(factor, tvm.ir.Call)
            and str(factor.op.name).endswith("if_then_else")
            and len(factor.args) == 3
            and _is_zero(factor.args[2])
        ):
            return factor.args[0]
    return None


def _loads_itself(expr: Any, store: Any) -> bool:
    return (
        isinstance(expr, tvm.ir.expr.TensorLoad)  # TVM 0.27's buffer load
        and expr.source.same_as(store.buffer)
        and len(expr.indices) == len(store.indices)
        and all(i.same_as(j) for i, j in zip(expr.indices, store.indices))
    )


def _factors(expr: Any) -> list[Any]:
    """The factors of a product, looking through casts (a cast of zero is zero)."""
    if isinstance(expr, tirx.Mul):
        return _factors(expr.a) + _factors(expr.b)
    if isinstance(expr, tirx.Cast):
        return _factors(expr.value)
    return [expr]


def _is_zero(expr: Any) -> bool:
    if isinstance(expr, tirx.Cast):
        return _is_zero(expr.value)
    return isinstance(expr, tirx.IntImm | tirx.FloatImm) and expr.value == 0


def _zero_condition(
    func: tirx.PrimFunc, realize: Any, buffer: str
) -> tuple[list[Any], list[Any], Any, dict[Any, Any]] | None:
    """``(variables, their values, condition, offsets)``: the condition under which the block
    of ``realize`` reads a non-zero element of ``buffer``, in ``variables``, from ``buffer``'s
    zero-padding block, else from the padding inlined into the block
    (:func:`inline_zero_condition`). The values are in the loop variables and, along each
    dimension of ``buffer`` that the block reads more than one element of (an intrinsic's
    operand tile), an offset variable: ``offsets`` maps each to its range (a
    ``tvm.sym.int_set.IntervalSet``), over which a guard must be relaxed
    (:func:`_quantified`). None when neither is there."""
    from tvm.sym.int_set import IntervalSet

    block = realize.block
    block_vars = [iv.var for iv in block.iter_vars]
    found = _padding_block(func.body, buffer)
    if found is None:
        condition = inline_zero_condition(block)
        if condition is None:
            return None
        return block_vars, list(realize.iter_values), condition, {}
    _, pad_vars, condition, inverse = found
    regions = [r for r in block.reads if r.source.name == buffer]
    if len(regions) != 1:
        return None
    index, offsets = [], {}
    for dim, r in enumerate(regions[0].region):
        low = _substitute(r.min, block_vars, realize.iter_values)
        if not _is_one(r.extent):
            offset = tirx.Var(f"{buffer}_offset{dim}", low.ty)
            offsets[offset] = IntervalSet(tirx.const(0, str(low.ty)), r.extent - 1)
            low = low + offset
        index.append(low)
    if inverse is not None:
        index = list(inverse.map_indices(index))
    return pad_vars, index, condition, offsets


def _guard(
    func: tirx.PrimFunc, name: str, buffer: str, place: str, boundary_version: bool = True
) -> tirx.PrimFunc:
    path = _path(func.body, name)
    if path is None or path[-1].block.init is not None:
        return func
    from tvm.sym.analyzer import Analyzer
    from tvm.sym.int_set import IntervalSet

    found = _zero_condition(func, path[-1], buffer)
    if found is None:
        return func
    pad_vars, index, condition, offsets = found
    at = {i: s for i, s in enumerate(path) if isinstance(s, tirx.For)}
    loops = list(at.values())
    loop_values = [lp.min if _is_one(lp.extent) else lp.loop_var for lp in loops]
    relaxed = dict(offsets)  # variables a guard cannot test: it must hold for some value
    for lp in loops:
        if (
            lp.kind == tirx.ForKind.VECTORIZED
            or lp.thread_binding is not None
            or (place == "outer" and _unrolled(lp))
        ):
            relaxed[lp.loop_var] = IntervalSet(lp.min, lp.min + lp.extent - 1)
    prover = Analyzer()
    for lp in loops:
        prover.bind(lp.loop_var, tvm.ir.Range.from_min_extent(lp.min, lp.extent))
    outer: dict[int, list[Any]] = {}  # path index -> conditions, above every unrolled loop
    inner: dict[int, list[Any]] = {}  # the same, under an unrolled loop (place "all" only)
    uses: dict[int, list[int]] = {}  # id of an inner condition -> path indices of its loops
    for part in conjuncts(condition):
        cond = _substitute(
            _substitute(part, pad_vars, index), [lp.loop_var for lp in loops], loop_values
        )
        used = {v.name for v in undefined_vars(cond)}
        dom = {v: r for v, r in relaxed.items() if v.name in used}
        if dom:
            cond = _quantified(cond, dom, every=False)  # an upper bound: never skips a value
            if cond is None or prover.can_prove(cond):
                continue  # not a comparison, or it holds somewhere in every tile
            used = {v.name for v in undefined_vars(cond)}
        depth = [i for i, lp in at.items() if lp.loop_var.name in used]
        if not used or len(depth) != len(used):
            continue  # constant, or depends on something other than loops on the path
        j = max(depth) + 1  # wrap the first statement below it that holds the block alone
        while isinstance(path[j], tirx.SeqStmt) or len(_realizes(path[j])) > 1:
            j += 1
        if not any(_unrolled(s) for s in path[:j]):
            outer.setdefault(j, []).append(cond)
        elif place == "all":
            inner.setdefault(j, []).append(cond)
            uses[id(cond)] = depth
    if not outer and not inner:
        return func

    if not inner or not boundary_version:  # one version of the loop nest
        return func.with_body(_rebuild(path, 0, _merge(outer, inner)))
    version = _boundary_version(path, at, inner, uses)
    if version is not None and _holds_always(version[1]):  # no tile reads the padding
        return func.with_body(_rebuild(path, 0, outer))
    rows = None if version is None else _row_versions(path, at, inner, uses, version[0])
    if rows is None:  # more ways to read the padding than versions: ``outer`` guards
        return _guard(func, name, buffer, "outer")
    at_index, unroll, versions = rows
    low = {j: c for j, c in outer.items() if j >= at_index}
    high = {j: c for j, c in outer.items() if j < at_index}
    node = None
    for n, (match, guards) in reversed(list(enumerate(versions))):
        copy = _rebuild(path, at_index, _merge(low, guards), unroll=unroll if guards else ())
        if n:
            copy = _fresh_copy(copy, path, at_index, BOUNDARY_SUFFIX + (str(n) if n > 1 else ""))
        node = copy if node is None else tirx.IfThenElse(match, copy, node)
    versioned = func.with_body(_rebuild(path, 0, high, node, at_index))
    if not _well_formed(versioned):  # a definition a copy could not renew: ``outer`` guards
        return _guard(func, name, buffer, "outer")
    return versioned


def _holds_always(cond: Any) -> bool:
    return isinstance(cond, tirx.IntImm) and bool(cond.value)


def _well_formed(func: tirx.PrimFunc) -> bool:
    from tvm.s_tir.analysis import verify_well_formed

    try:
        return bool(verify_well_formed(func, assert_mode=False))
    except Exception:  # noqa: BLE001 - the verifier itself failing means not verified
        return False


def _fresh_copy(stmt: Any, path: list[Any], at_index: int, suffix: str) -> Any:
    """``stmt`` (a version of ``path[at_index]``) with fresh variables and buffers for each of
    its own definitions (loops, blocks, matched buffers, let bindings), its free variables
    (the loops and block variables above it) and the buffers it reads or writes kept: a copy
    that may sit beside the original, as TIR defines each variable and buffer once. TVM's
    ``RenewDefs`` renews every definition of a PrimFunc: ``stmt`` is wrapped in one whose
    parameters are those variables and buffers (TVM 0.27's buffers are variables), and the
    renewed parameters are mapped back to them (``tvm_ffi.structural_map``). Its blocks'
    names get ``suffix``, so that each name stays one block's."""
    free: list[Any] = []
    for s in path[:at_index]:
        if isinstance(s, tirx.For):
            free.append(s.loop_var)
        elif isinstance(s, s_tir.SBlockRealize):
            free += [iv.var for iv in s.block.iter_vars]
    buffers: dict[str, Any] = {}
    inner: set[str] = set()
    for realize in _realizes(stmt):
        block = realize.block
        inner |= {b.name for b in block.alloc_buffers}
        inner |= {m.buffer.name for m in block.match_buffers}
        for region in [*block.reads, *block.writes]:
            buffers.setdefault(region.source.name, region.source)
    outside = [b for name, b in buffers.items() if name not in inner]
    kept = [*free, *outside]
    renewed = tvm.get_global_func("s_tir.RenewDefs")(tirx.PrimFunc(kept, stmt))
    back = list(zip(renewed.params, kept))

    def original(var: Any) -> Any:
        return next((old for new, old in back if var.same_as(new)), var)

    def renamed(b: Any) -> Any:
        return _block(b, f"{b.name_hint}{suffix}", b.body)

    return tvm_ffi.structural_map(
        renewed.body, [(tvm.ir.expr.Var, original), (s_tir.SBlock, renamed)]
    )


def _merge(a: dict[int, list[Any]], b: dict[int, list[Any]]) -> dict[int, list[Any]]:
    out = {j: list(c) for j, c in a.items()}
    for j, c in b.items():
        out.setdefault(j, []).extend(c)
    return out


def _rebuild(
    path: list[Any],
    top: int,
    guards: dict[int, list[Any]],
    node: Any = None,
    below: int = -1,
    unroll: Sequence[int] = (),
) -> Any:
    """``path[top]`` rebuilt bottom-up with ``guards`` (path index -> conditions, each
    wrapping the statement at its index), the loops at the indices of ``unroll`` unrolled;
    with ``node``, ``node`` stands for ``path[below]`` (guards and all) and only the
    statements above it are rebuilt."""
    if node is None:
        below = len(path) - 1
        node = _wrapped(path[-1], guards.get(below))
    for j in range(below - 1, top - 1, -1):
        kind = tirx.ForKind.UNROLLED if j in unroll else None
        node = _wrapped(_with_child(path[j], path[j + 1], node, kind), guards.get(j))
    return node


def _wrapped(stmt: Any, conds: list[Any] | None) -> Any:
    return tirx.IfThenElse(_conjunction(conds), stmt, None) if conds else stmt


def _conjunction(conds: Sequence[Any]) -> Any:
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


def _boundary_version(
    path: list[Any], at: dict[int, Any], inner: dict[int, list[Any]], uses: dict[int, list[int]]
) -> tuple[int, Any] | None:
    """``(path index, interior condition)`` for the guards under an unrolled loop: the
    statement at that index is the first under the deepest loop above the unrolled ones that
    a guard depends on (where :func:`_version_point` starts), and the condition says that no
    iteration of the loops under it reads the padding (where it always holds, nothing needs
    a version). The condition quantifies each guard over those loops' ranges (TVM's
    ``int_set``: a guard ``a <= b`` holds throughout where the minimum of ``b - a`` is at
    least 0). None when there is no such statement or a guard is not such a comparison."""
    from tvm.sym.analyzer import Analyzer
    from tvm.sym.int_set import IntervalSet

    first = min(i for i, s in at.items() if _unrolled(s))
    conds = [c for cs in inner.values() for c in cs]
    top = [max((i for i in uses[id(c)] if i < first), default=-1) + 1 for c in conds]
    k = max(top)
    while isinstance(path[k], tirx.SeqStmt) or len(_realizes(path[k])) > 1:
        if k == first:  # the unrolled loop holds other blocks too
            return None
        k += 1
    analyzer = Analyzer()
    interior = []
    for c in conds:
        dom = {
            at[i].loop_var: IntervalSet(at[i].min, at[i].min + at[i].extent - 1)
            for i in uses[id(c)]
            if i >= k
        }
        held = _quantified(c, dom, every=True)
        if held is None:
            return None  # no comparison, unbounded, or still varies inside
        interior.append(held)
    return k, analyzer.simplify(_conjunction(interior))


MAX_ROW_VERSIONS = 9
"""The most versions of the loop nest that :func:`_row_versions` emits (the interior one
included); more, and ``all`` guards are ``outer`` ones."""

MAX_UNROLLED_TAPS = 16
"""The most iterations of the tap loops :func:`_version_point` raises a version point above
(and the versions that keep a guard unroll)."""

MAX_ROW_POINTS = 1 << 18
"""The most iterations of the loops the guards depend on (above the split point, times the
taps and rows under it) over which :func:`_row_versions` evaluates them."""


def _row_versions(
    path: list[Any],
    at: dict[int, Any],
    inner: dict[int, list[Any]],
    uses: dict[int, list[int]],
    at_index: int,
) -> tuple[int, list[int], list[tuple[Any, dict[int, list[Any]]]]] | None:
    """The versions of the loop nest that ``all`` guards make (module docstring): one per
    way the guards ``inner`` (path index -> conditions; ``uses``: the path indices of each
    one's loops) hold over the taps and rows under the split point, each branch-free once
    TVM unrolls those loops (``ForKind.UNROLLED``), with the (tap, row) pairs that read only
    padding left out. The point is ``at_index`` (under the deepest loop above the register
    tile that a guard depends on) raised above the tap loops by :func:`_version_point`.

    The guards are evaluated (numpy, :func:`_evaluate`) at every iteration of the loops above
    the point that they depend on, for every tap and row: each distinct outcome is a version,
    the interior one (every guard holding) first, then by how often it occurs. A version's
    guards are the guards with those loops set to one iteration of that outcome. It runs
    where a few of the guards, at a few (tap, row) pairs, have the values that tell its
    outcome from the others' (a greedy choice); the last one runs wherever none of the others
    does, as the outcomes are all the loops can produce.

    Returns ``(point, tap loops to unroll, [(condition, guards), ...])``, the guards by path
    index like ``inner`` and the last condition None; None where the guards depend on a loop
    of no constant extent, on more iterations than :data:`MAX_ROW_POINTS`, hold something
    :func:`_evaluate` cannot evaluate, or give more than :data:`MAX_ROW_VERSIONS` outcomes.
    """
    import itertools

    import numpy as np
    from tvm.sym.analyzer import Analyzer

    conds = [(j, c) for j, cs in inner.items() for c in cs]
    loops = sorted({i for _, c in conds for i in uses[id(c)]})
    at_index, unroll = _version_point(path, at, loops, at_index)
    above = [i for i in loops if i < at_index]
    rows = [i for i in loops if i >= at_index]
    if not all(
        isinstance(at[i].min, tirx.IntImm) and isinstance(at[i].extent, tirx.IntImm) for i in loops
    ):
        return None
    extents = [int(at[i].extent) for i in loops]
    if math.prod(extents) > MAX_ROW_POINTS:
        return None
    grid = np.meshgrid(
        *[
            np.arange(int(at[i].min), int(at[i].min) + e, dtype=np.int64)
            for i, e in zip(loops, extents, strict=True)
        ],
        indexing="ij",
    )
    env = {at[i].loop_var.name: g for i, g in zip(loops, grid, strict=True)}
    n_above = math.prod(int(at[i].extent) for i in above)
    table = []  # (iterations above, outcome per (guard, row)) booleans
    for _, c in conds:
        held = _evaluate(c, env)
        if held is None:
            return None
        held = np.broadcast_to(np.asarray(held, dtype=bool), grid[0].shape if grid else ())
        table.append(held.reshape(n_above, -1))
    outcome = np.concatenate(table, axis=1)  # iterations above x (guard, row)
    kinds, first, counts = np.unique(outcome, axis=0, return_index=True, return_counts=True)
    if len(kinds) > MAX_ROW_VERSIONS:
        return None
    order = sorted(range(len(kinds)), key=lambda k: (not kinds[k].all(), -counts[k], first[k]))
    kinds, first = kinds[order], first[order]
    columns = _telling_columns(kinds)
    width = [table[g].shape[1] for g in range(len(conds))]
    starts = list(itertools.accumulate([0, *width]))
    row_points = list(itertools.product(*[range(int(at[i].extent)) for i in rows]))
    analyzer = Analyzer()
    for i in above:
        analyzer.bind(at[i].loop_var, tvm.ir.Range.from_min_extent(at[i].min, at[i].extent))
    within = Analyzer()  # the rows' own ranges, where a version's guards are simplified
    for i in rows:
        within.bind(at[i].loop_var, tvm.ir.Range.from_min_extent(at[i].min, at[i].extent))
    above_vars = [at[i].loop_var for i in above]
    row_vars = [at[i].loop_var for i in rows]
    out = []
    for n, kind in enumerate(kinds):
        at_point = np.unravel_index(first[n], [int(at[i].extent) for i in above] or [1])
        values = [_iteration(at[i], int(v)) for i, v in zip(above, at_point, strict=False)]
        guards: dict[int, list[Any]] = {}
        for j, c in conds:
            fixed = within.simplify(_substitute(c, above_vars, values))
            if not (isinstance(fixed, tirx.IntImm) and fixed.value):  # true on every row
                guards.setdefault(j, []).append(fixed)
        match = None
        if n < len(kinds) - 1:
            terms = []
            for col in columns:
                g = next(x for x in range(len(conds)) if starts[x] <= col < starts[x + 1])
                point = row_points[col - starts[g]]
                fixed = [_iteration(at[i], v) for i, v in zip(rows, point, strict=True)]
                cond = _substitute(conds[g][1], row_vars, fixed)
                terms.append(cond if kind[col] else tirx.Not(cond))
            match = analyzer.simplify(_conjunction(terms))
        out.append((match, guards))
    return at_index, unroll, out


def _iteration(loop: Any, n: int) -> Any:
    """The value of ``loop``'s variable in its ``n``-th iteration (0-based), of its type."""
    return tirx.const(int(loop.min) + n, str(loop.loop_var.ty))


def _telling_columns(kinds: Any) -> list[int]:
    """Columns of the distinct boolean rows ``kinds`` (a 2-D numpy array) on which no two of
    them agree, chosen greedily: each time the column that tells the most rows apart."""
    columns: list[int] = []
    while len({tuple(k[columns]) for k in kinds}) < len(kinds):
        columns.append(
            max(
                range(kinds.shape[1]),
                key=lambda col: len({tuple(k[[*columns, col]]) for k in kinds}),
            )
        )
    return columns


def _version_point(
    path: list[Any], at: dict[int, Any], loops: Sequence[int], at_index: int
) -> tuple[int, list[int]]:
    """``(path index, loops to unroll)``: where :func:`_row_versions` splits the loop nest,
    given the path indices of the ``loops`` its guards depend on, and the point
    ``at_index`` under the deepest of those above the register tile. The point is raised
    above the reduction loops among them (serial, of constant extent, at most
    :data:`MAX_UNROLLED_TAPS` iterations together: a convolution's tap loops), which each
    version that keeps a guard unrolls: no branch is then left between the reduction loops
    that hold the tile, and LLVM keeps the tile's accumulators in registers across them
    (measured, C1D3 on a Xeon: a branch chain under the tap loop cost 8 %). ``(at_index, [])``
    where the raised point holds more than the update block, or the taps are more."""
    realize = path[-1]
    reduce = {
        v.name
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
        if int(iv.iter_type) == tirx.IterVar.CommReduce
        for v in undefined_vars(value)
    }
    first = min(i for i, s in at.items() if _unrolled(s))
    taps = [
        i
        for i in loops
        if i < first
        and at[i].kind == tirx.ForKind.SERIAL
        and isinstance(at[i].extent, tirx.IntImm)
        and at[i].loop_var.name in reduce
    ]
    kept = [i for i in loops if i < first and i not in taps]
    k = max(kept) + 1 if kept else 0
    while isinstance(path[k], tirx.SeqStmt) or len(_realizes(path[k])) > 1:
        k += 1
    unroll = [i for i in taps if i >= k]
    if k >= at_index or math.prod(int(at[i].extent) for i in unroll) > MAX_UNROLLED_TAPS:
        return at_index, []
    return k, unroll


_NUMPY_BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "FloorDiv": "floor_divide",
    "FloorMod": "mod",
    "Min": "minimum",
    "Max": "maximum",
    "EQ": "equal",
    "NE": "not_equal",
    "LT": "less",
    "LE": "less_equal",
    "GT": "greater",
    "GE": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
}


def _evaluate(expr: Any, env: dict[str, Any]) -> Any | None:
    """``expr`` (integer and boolean TIR arithmetic over the variables of ``env``, by name)
    evaluated elementwise on ``env``'s numpy arrays; None where it holds anything else."""
    import numpy as np

    if isinstance(expr, tirx.IntImm):
        return np.int64(expr.value)
    if isinstance(expr, tirx.Var):
        return env.get(expr.name)
    if isinstance(expr, tirx.Cast) and "int" in str(expr.ty):
        return _evaluate(expr.value, env)
    if isinstance(expr, tirx.Not):
        a = _evaluate(expr.a, env)
        return None if a is None else np.logical_not(a)
    name = type(expr).__name__
    if name in _NUMPY_BINARY and type(expr) is getattr(tirx, name):
        a, b = _evaluate(expr.a, env), _evaluate(expr.b, env)
        if a is None or b is None:
            return None
        return getattr(np, _NUMPY_BINARY[name])(a, b)
    return None


def _quantified(cond: Any, dom: dict[Any, Any], every: bool) -> Any | None:
    """``cond`` (a comparison ``a <= b``, ``a < b``, ``a >= b`` or ``a > b``) quantified over
    the variables of ``dom`` (each in its ``IntervalSet``), in the other variables: for
    ``every`` value, ``0 <= min(b - a)``; for some value, ``0 <= max(b - a)`` (TVM's
    ``int_set``: exact for an affine ``b - a``; otherwise a bound that makes the ``every``
    condition stricter and the ``some`` one looser than exact). None when ``cond`` is no
    comparison or the bound is unbounded or still depends on ``dom``."""
    from tvm.sym.analyzer import Analyzer

    if isinstance(cond, tirx.LE | tirx.LT):
        gap = cond.b - cond.a
    elif isinstance(cond, tirx.GE | tirx.GT):
        gap = cond.a - cond.b
    else:
        return None
    analyzer = Analyzer()
    bounds = analyzer.int_set(gap, dom)
    bound = bounds.min_value if every else bounds.max_value
    if {v.name for v in undefined_vars(bound)} & ({v.name for v in dom} | _INFINITE):
        return None
    strict = isinstance(cond, tirx.LT | tirx.GT)
    held = tirx.LE(tirx.const(1 if strict else 0, str(bound.ty)), bound)
    return held if every else analyzer.simplify(held)


_INFINITE = {"neg_inf", "pos_inf"}


def _unrolled(stmt: Any) -> bool:
    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.UNROLLED


def _is_one(extent: Any) -> bool:
    return isinstance(extent, tirx.IntImm) and extent.value == 1
