"""A replayable schedule template: ``tvm.s_tir.Schedule`` primitives with symbolic arguments.

Rules (``heronlike.rules``) append :class:`Step` records; a step's arguments may name loops and
blocks made by earlier steps (:class:`Sym`), CSP variables (:class:`Ref`) or a compute location
chosen by a CSP variable (:class:`Choice`), or a loop order chosen by position variables
(:class:`Ordered`). A *candidate program* is the template replayed with
one assignment of the CSP (:meth:`Template.apply`), which is how Heron instantiates a schedule
for a solution (ASPLOS'23 §4.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tvm import s_tir, tirx


@dataclass(frozen=True)
class Sym:
    """A loop or block made by an earlier step."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Ref:
    """The value of a CSP variable in the assignment being applied."""

    var: str

    def __str__(self) -> str:
        return f"${self.var}"


@dataclass(frozen=True)
class Choice:
    """``options[assignment[index]]``: e.g. the loop a stage is computed at (SELECT)."""

    index: str
    options: tuple[Any, ...]

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.options))}][${self.index}]"


@dataclass(frozen=True)
class Ordered:
    """``options`` sorted by the values of the ``positions`` variables (one per option, a
    permutation of ``1 .. n``; a loop order chosen by knobs); with ``pick`` set, the one
    option at that index of the sorted list (``-1``: the innermost loop of the order)."""

    positions: tuple[str, ...]
    options: tuple[Any, ...]
    pick: int | None = None

    def select(self, assignment: Mapping[str, int]) -> Any:
        keyed = sorted(zip(self.positions, self.options), key=lambda po: int(assignment[po[0]]))
        ordered = tuple(o for _, o in keyed)
        return ordered if self.pick is None else ordered[self.pick]

    def __str__(self) -> str:
        pairs = ", ".join(f"{o}@${p}" for p, o in zip(self.positions, self.options))
        return f"order({pairs})" + ("" if self.pick is None else f"[{self.pick}]")


@dataclass(frozen=True)
class PackedLayout:
    """Index map that tiles some buffer dimensions and moves the tile indices innermost.

    ``tiles[d]`` is the tile size of dimension ``d`` (1 = untiled). The new layout is
    ``[x_0 // t_0, ..., x_r // t_r, x_a % t_a, x_b % t_b, ...]`` for the tiled dimensions
    ``a, b, ...`` in ``inner_order``. For the DL Boost weight ``W[n, k]`` with
    ``tiles = (16, 4)`` this is ``W[n // 16, k // 4, n % 16, k % 4]``. ``outer_order``
    permutes the outer (tile index) dimensions (None: the buffer's order): AMX reads a weight
    stored ``W[k, n]`` as ``W[n // 16, k // 4, n % 16, k % 4]`` (``outer_order = (1, 0)``).
    """

    tiles: tuple[int, ...]
    inner_order: tuple[int, ...]
    outer_order: tuple[int, ...] | None = None

    def _outer(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return values if self.outer_order is None else tuple(values[d] for d in self.outer_order)

    def __call__(self, *idx: Any) -> tuple[Any, ...]:
        outer = tuple(x // t if t > 1 else x for x, t in zip(idx, self.tiles, strict=True))
        return self._outer(outer) + tuple(idx[d] % self.tiles[d] for d in self.inner_order)

    def packed_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        outer = tuple(s // t for s, t in zip(shape, self.tiles, strict=True))
        return self._outer(outer) + tuple(self.tiles[d] for d in self.inner_order)

    def pack(self, array: Any) -> Any:
        """Apply the layout to a numpy array (the one-time weight pre-packing)."""
        import numpy as np

        shape = array.shape
        split: list[int] = []
        for s, t in zip(shape, self.tiles, strict=True):
            split += [s // t, t]
        tiled = array.reshape(split)
        outer = [2 * d for d in range(len(shape))]
        inner = [2 * d + 1 for d in self.inner_order]
        rest = [2 * d + 1 for d in range(len(shape)) if d not in self.inner_order]
        # untiled dims have a tile axis of extent 1: keep it beside its outer axis
        order = []
        for d in self.outer_order or range(len(shape)):
            order.append(outer[d])
            if 2 * d + 1 in rest:
                order.append(2 * d + 1)
        order += inner
        packed = np.ascontiguousarray(tiled.transpose(order))
        return packed.reshape(self.packed_shape(shape))

    def __str__(self) -> str:
        names = [f"x{d}" for d in range(len(self.tiles))]
        out = list(
            self._outer(tuple(f"{n} // {t}" if t > 1 else n for n, t in zip(names, self.tiles)))
        )
        out += [f"{names[d]} % {self.tiles[d]}" for d in self.inner_order]
        return f"lambda {', '.join(names)}: ({', '.join(out)})"


@dataclass(frozen=True)
class Step:
    """One schedule primitive: ``outs = sch.<op>(*args)``."""

    op: str
    args: tuple[Any, ...]
    outs: tuple[str, ...] = ()
    rule: str = ""

    def __str__(self) -> str:
        def text(a: Any) -> str:
            if isinstance(a, tuple):
                return "[" + ", ".join(text(x) for x in a) + "]"
            if isinstance(a, str):
                return repr(a)
            return str(a)

        call = f"sch.{self.op}({', '.join(text(a) for a in self.args)})"
        lhs = f"{', '.join(self.outs)} = " if self.outs else ""
        note = f"  # {self.rule}" if self.rule else ""
        return f"{lhs}{call}{note}"


# primitives whose positional arguments after the first are spread (reorder(*loops), fuse(*loops))
_VARIADIC = {"reorder", "fuse"}


def vectorize_innermost(sch: s_tir.Schedule, block: Any, lanes: int) -> None:
    """Vectorise the innermost loop of ``block``, split to ``lanes`` first if it is longer.

    A template-level helper: the innermost loop of an attached block depends on the chosen
    compute location, so its symbol cannot be named when the template is written. Nothing
    is vectorised when that loop also holds other blocks (a one-element tile has no loop of its
    own) or when its extent exceeds ``lanes`` without being a multiple of it.
    """
    loops = sch.get_loops(block)
    if not loops:
        return
    inner = loops[-1]
    if len(sch.get_child_blocks(inner)) != 1:
        return
    extent = int(sch.get(inner).extent)
    if extent > lanes and extent % lanes == 0:
        inner = sch.split(inner, [None, lanes])[1]
    elif extent > lanes:
        return
    sch.vectorize(inner)


def parallelize_vectorize(
    sch: s_tir.Schedule, block: Any, lanes: int, parallel: bool = True
) -> None:
    """Schedule a materialised data-movement stage (zero padding, a generated matrix): fuse
    every loop but the innermost and run it ``parallel`` (unless ``parallel`` is false: a
    stage too small to pay for the launch); vectorise the innermost loop when its extent is
    a multiple of ``lanes`` or at most ``lanes`` (split to ``lanes`` first).

    A stage written in a packed layout (``transform_layout``: SCAN's generated matrix read
    by VNNI as ``[n // 16, k // 4, n % 16, k % 4]``) is first iterated in that layout's
    order (:func:`follow_layout`), its innermost loops fused up to ``lanes`` elements: one
    contiguous vector store per tile instead of a scatter of single bytes.
    """
    follow_layout(sch, block, lanes)
    loops = sch.get_loops(block)
    if len(loops) > 1:
        outer = sch.fuse(*loops[:-1]) if len(loops) > 2 else loops[0]
        if parallel:
            sch.parallel(outer)
    _vectorize_copy(sch, block, lanes)


def follow_layout(sch: s_tir.Schedule, block: Any, lanes: int) -> None:
    """Make ``block`` (a root-level block of spatial variables storing ``buffer[f(v)] =
    ...``, ``f`` not the identity) iterate over its buffer's indices rather than its own
    variables (TVM's ``transform_block_layout`` by ``f``), then fuse its innermost loops while
    their extents' product stays at most ``lanes``: consecutive iterations write consecutive
    elements. Nothing changes when ``f`` is the identity or TVM refuses (``f`` is no
    bijection of the block's domain)."""
    b = sch.get(block)
    store = b.body
    variables = [iv.var for iv in b.iter_vars]
    if not isinstance(store, tirx.BufferStore) or any(
        iv.iter_type != tirx.IterVar.DataPar for iv in b.iter_vars
    ):
        return
    if len(store.indices) == len(variables) and all(
        i.same_as(v) for i, v in zip(store.indices, variables)
    ):
        return
    try:
        sch.transform_block_layout(block, tirx.IndexMap(variables, list(store.indices), None))
    except Exception:  # noqa: BLE001 - TVM checks before it changes anything
        return
    inner, width = [], 1
    for lp in reversed(sch.get_loops(block)[1:]):
        width *= int(sch.get(lp).extent)
        if width > lanes:
            break
        inner.insert(0, lp)
    if len(inner) > 1:
        sch.fuse(*inner)


def _vectorize_copy(sch: s_tir.Schedule, block: Any, lanes: int) -> None:
    """Vectorise the innermost loop of a data-movement block when its extent is at most
    ``lanes`` or a multiple of it (split to ``lanes`` first)."""
    inner = sch.get_loops(block)[-1]
    extent = int(sch.get(inner).extent)
    if extent > lanes and extent % lanes == 0:
        inner = sch.split(inner, [None, lanes])[1]
    if extent <= lanes or extent % lanes == 0:
        sch.vectorize(inner)


def materialize_at(sch: s_tir.Schedule, block: Any, loop: Any, lanes: int) -> None:
    """Write a materialised operand inside its consumer's loop ``loop`` (a ``parallel`` task
    loop): ``compute_at``, so each iteration writes the region it reads; the innermost loop of
    the block is vectorised to ``lanes`` (split first when longer), as
    :func:`parallelize_vectorize` does at the root. Where TVM refuses to move the block, or
    ``loop`` is None (a knob chose the root), it stays a root-level pass, scheduled by
    :func:`parallelize_vectorize`."""
    if loop is None:
        parallelize_vectorize(sch, block, lanes)
        return
    try:
        sch.compute_at(block, loop, preserve_unit_loops=False)
    except Exception:  # noqa: BLE001 - TVM checks before it changes anything
        parallelize_vectorize(sch, block, lanes)
        return
    _vectorize_copy(sch, block, lanes)


def row_reduction(sch: s_tir.Schedule, block: Any, at: Any, lanes: int) -> None:
    """Schedule a reduction without data reuse (a row max, sum or moment; see
    ``heronlike.rules.rows``) at loop ``at`` of its consumer, or at the root (``at`` None)
    with its spatial loops fused into one ``parallel`` loop.

    When its innermost loop is a reduction whose extent is a multiple of ``lanes`` (at least
    two vectors long), that loop is split by ``lanes`` and ``rfactor``-ed: a partial-result
    stage keeps ``lanes`` running results per row in one vector register (its ``lanes`` loop
    vectorised, its initialisation split off and vectorised), and the stage itself then
    reduces the ``lanes`` partial results. Reassociating the reduction this way changes a
    float sum's rounding (as every vectorised reduction does), not its value beyond it.
    Without such a loop, or when TVM cannot ``rfactor`` the reducer, the reduction stays
    serial inside its row.
    """
    from tvm.s_tir import ScheduleError
    from tvm.tirx import Var

    original = {iv.var.name for iv in sch.get(block).iter_vars}
    inner = sch.get_loops(block)[-1]
    extent = int(sch.get(inner).extent)
    rf = None
    if extent % lanes == 0 and extent >= 2 * lanes and _is_reduce_loop(sch, block, inner):
        try:
            ndim = len(sch.get(block).writes[0].region)  # partial results innermost
            rf = sch.rfactor(sch.split(inner, [None, lanes])[1], ndim)
        except ScheduleError:  # a reducer TVM cannot factor: stay serial
            rf = None
    if at is None:
        spatial = [lp for lp in sch.get_loops(block) if not _is_reduce_loop(sch, block, lp)]
        if spatial:
            at = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
            sch.parallel(at)
    else:
        sch.compute_at(block, at)
    if rf is None:
        return
    if at is not None:
        sch.compute_at(rf, at)
    loops = sch.get_loops(rf)
    realize = sch.get(loops[-1]).body
    binding = {
        iv.var.name: value
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
    }
    (rf_var,) = [
        iv.var.name
        for iv in realize.block.iter_vars
        if int(iv.iter_type) == 0 and iv.var.name not in original
    ]
    if not isinstance(binding[rf_var], Var):
        return
    vec = next(lp for lp in loops if sch.get(lp).loop_var.same_as(binding[rf_var]))
    row = -1 if at is None else [sch.get(lp).same_as(sch.get(at)) for lp in loops].index(True)
    rest = [lp for lp in loops[row + 1 :] if not sch.get(lp).same_as(sch.get(vec))]
    if rest:
        sch.reorder(*rest, vec)
        sch.vectorize(vec)
        init = sch.decompose_reduction(rf, rest[0])
        sch.vectorize(sch.get_loops(init)[-1])


def _is_reduce_loop(sch: s_tir.Schedule, block: Any, loop: Any) -> bool:
    """Whether ``loop`` binds a reduction iterator of ``block`` (its only child block)."""
    from tvm.tirx.analysis import undefined_vars

    var = sch.get(loop).loop_var
    realize = sch.get(sch.get_loops(block)[-1]).body
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if int(iv.iter_type) == 2 and any(v.same_as(var) for v in undefined_vars(value)):
            return True
    return False


def own_loops(sch: s_tir.Schedule, block: Any) -> list[Any]:
    """The innermost loops of ``block`` that hold no other block: the loops a compute-at
    stage got from its region (their number depends on the chosen tile, since loops of extent
    1 are not created)."""
    loops = sch.get_loops(block)
    out: list[Any] = []
    for loop in reversed(loops):
        if len(sch.get_child_blocks(loop)) != 1:
            break
        out.insert(0, loop)
    return out


def cooperative_fetch(
    sch: s_tir.Schedule, block: Any, threads_y: int, threads_x: int, lanes: int
) -> None:
    """Schedule a GPU scratchpad load that all threads of a block share: fuse the stage's own
    loops and split them as ``[iterations, threadIdx.y, threadIdx.x, lanes]``, binding the
    thread parts and vectorising the lanes (TVM's and Heron's "cooperative fetch"). The
    constraint rules make ``threads_y * threads_x * lanes`` divide the tile exactly."""
    loops = own_loops(sch, block)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    _, ty, tx, vec = sch.split(fused, [None, threads_y, threads_x, lanes])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)


def tensorize_tile(
    sch: s_tir.Schedule,
    block: Any,
    rows: int,
    cols: int,
    intrinsic: str,
    row_dim: int = -2,
    col_dim: int = -1,
    permuted_layout: int = 0,
) -> None:
    """Tile the loops of buffer dimensions ``row_dim`` and ``col_dim`` among ``block``'s own
    loops (one per dimension: the block was attached with ``preserve_unit_loops``) by
    ``rows × cols``, move the two tile loops innermost (rows, then columns) and ``tensorize``
    them with ``intrinsic`` (a fragment load or store). With ``permuted_layout`` the
    tensorized block is annotated for TVM's ``InjectPermutedLayout`` (an ``ldmatrix`` from a
    swizzled shared tile; the annotation must sit on the block tensorize creates)."""
    loops = own_loops(sch, block)
    r, c = loops[row_dim], loops[col_dim]
    rest = [lp for i, lp in enumerate(loops) if lp not in (r, c)]
    ro, ri = sch.split(r, [None, rows])
    co, ci = sch.split(c, [None, cols])
    sch.reorder(*rest, ro, co, ri, ci)
    sch.tensorize(ri, intrinsic)
    if permuted_layout:
        (tile,) = sch.get_child_blocks(co)
        sch.annotate(tile, "permuted_layout", 1)


def fragment_layout(
    sch: s_tir.Schedule, block: Any, access: str, rows: int, cols: int, layout: Any
) -> None:
    """Re-lay the fragment buffer ``block`` reads (``access="read"``) or writes (``"write"``)
    tile by tile: ``[.., r, c] -> [.., r // rows, c // cols, *layout(r % rows, c % cols)]``,
    where ``layout`` maps a ``rows × cols`` tile onto a warp's registers ``(thread, element)``
    (``ldmatrix`` / ``mma.sync`` fragments; TVM then spreads the thread dimension over the
    warp's lanes). Nothing when ``layout`` is None (opaque WMMA fragments)."""
    if layout is None:
        return

    def index(*idx: Any) -> tuple[Any, ...]:
        r, c = idx[-2], idx[-1]
        return (*idx[:-2], r // rows, c // cols, *layout(r % rows, c % cols))

    sch.transform_layout(block, (access, 0), index)


def cache_write_at(sch: s_tir.Schedule, block: Any, scope: str, loop: Any) -> tuple[Any]:
    """``cache_write`` ``block``'s output into ``scope`` and compute the copy out at ``loop``
    (``reverse_compute_at``), unless ``cache_write`` already placed it under ``loop`` (it does
    when the output's consumer is attached there). Returns the copy block."""
    copy = sch.cache_write(block, 0, scope)
    target = sch.get(loop)
    if not any(sch.get(lp).same_as(target) for lp in sch.get_loops(copy)):
        sch.reverse_compute_at(copy, loop)
    return (copy,)


def tensorize_last(sch: s_tir.Schedule, block: Any, count: int, intrinsic: str) -> None:
    """``tensorize`` the sub-nest of ``block``'s last ``count`` loops with ``intrinsic`` (an
    accumulator fill whose loops are already the intrinsic's tile)."""
    sch.tensorize(sch.get_loops(block)[-count], intrinsic)


def software_pipeline(
    sch: s_tir.Schedule,
    loop: Any,
    stages: int,
    asynchronous: int = 0,
    inner: Any = None,
    inner_stages: int = 1,
) -> None:
    """Pipeline ``loop`` in ``stages`` stages (nothing when ``stages`` is 1 or less): its
    children but the last (the shared-memory fetches) run ``stages - 1`` iterations ahead of
    the last (the computation), which TVM's ``InjectSoftwarePipeline`` implements with
    ``stages`` versions of each buffer they write. With ``asynchronous`` the fetches are the
    pipeline's async stage (``software_pipeline_async_stages = [0]``): built with the
    ``PassContext`` option ``tirx.use_async_copy``, their global-to-shared copies become
    ``cp.async`` (sm_80+) with commit/wait groups.

    ``inner`` (a loop inside ``loop``, its last child) is pipelined the same way in
    ``inner_stages`` stages when that is 2 or more: register double buffering of the
    fragments its first children load. TVM expands the inner pipeline first, so its prologue
    and epilogue join ``loop``'s children (stage ``stages - 1``, after the fetches)."""
    nested = 0
    if inner is not None and inner_stages > 1:
        body = sch.get(inner).body
        count = len(body.seq) if hasattr(body, "seq") else len(sch.get_child_blocks(inner))
        sch.annotate(inner, "software_pipeline_stage", [0] * (count - 1) + [inner_stages - 1])
        sch.annotate(inner, "software_pipeline_order", list(range(count)))
        nested = 2
    if stages <= 1:
        return
    children = len(sch.get_child_blocks(loop))
    body = sch.get(loop).body
    count = (len(body.seq) if hasattr(body, "seq") else children) + nested
    stage = [0] * (count - 1 - nested) + [stages - 1] * (1 + nested)
    sch.annotate(loop, "software_pipeline_stage", stage)
    sch.annotate(loop, "software_pipeline_order", list(range(count)))
    if asynchronous:
        sch.annotate(loop, "software_pipeline_async_stages", [0])


def split_k(
    sch: s_tir.Schedule, block: Any, factor: int, threads: int = 128, bind: bool = True
) -> tuple[Any, ...]:
    """Split the reduction of ``block`` (a GEMM-like stage whose last loop is its only
    reduction loop) across ``factor`` thread blocks: a two-stage, deterministic split-K.

    With ``factor`` > 1 the reduction loop is split ``[factor, rest]``, the ``factor`` part
    moved outermost and ``rfactor``-ed: a partial-sum stage ``<name>_rf`` computes
    ``P[s, ...] = sum over the s-th slice of the reduction`` (a global workspace buffer of
    the output's dtype; ``s`` bound to ``blockIdx.y``), and ``block`` becomes a second
    kernel that adds the ``factor`` partial sums of each output element in a fixed order
    (its output elements fused and split over ``threads``-thread blocks). With ``factor`` 1
    nothing changes.

    Returns:
        ``(stage block, final block or None, *loops)``: the block to tile (the partial-sum
        stage, else ``block``), the summing block, and the stage block's loops without the
        split part (one per loop of ``block``, the reduction's remainder last).
    """
    if factor <= 1:
        return (block, None, *sch.get_loops(block))
    loops = sch.get_loops(block)
    ks, _ = sch.split(loops[-1], [factor, None])
    sch.reorder(ks, *loops[:-1])
    rf = sch.rfactor(ks, 0)
    rf_loops = sch.get_loops(rf)
    final = sch.get_loops(block)
    sch.reorder(*final[1:], final[0])
    if not bind:
        return (rf, block, *rf_loops[1:])
    sch.bind(rf_loops[0], "blockIdx.y")
    elems = sch.fuse(*final[1:]) if len(final) > 2 else final[1]
    extent = int(sch.get(elems).extent)
    width = threads if extent % threads == 0 else 32 if extent % 32 == 0 else 1
    bx, tx = sch.split(elems, [None, width])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return (rf, block, *rf_loops[1:])


def _unit_loop(sch: s_tir.Schedule, loop: Any) -> bool:
    """Whether ``loop`` has the constant extent 1."""
    extent = sch.get(loop).extent
    return isinstance(extent, tirx.IntImm) and int(extent) == 1


_HELPERS = {
    "vectorize_innermost": vectorize_innermost,
    "parallelize_vectorize": parallelize_vectorize,
    "materialize_at": materialize_at,
    "row_reduction": row_reduction,
    "cooperative_fetch": cooperative_fetch,
    "tensorize_tile": tensorize_tile,
    "fragment_layout": fragment_layout,
    "tensorize_last": tensorize_last,
    "cache_write_at": cache_write_at,
    "software_pipeline": software_pipeline,
    "split_k": split_k,
}


class Template:
    """An ordered list of :class:`Step` over one PrimFunc."""

    def __init__(self, func: tirx.PrimFunc) -> None:
        self.func = func
        self.steps: list[Step] = []

    def add(self, step: Step) -> tuple[Sym, ...]:
        self.steps.append(step)
        return tuple(Sym(o) for o in step.outs)

    def apply(self, assignment: Mapping[str, int], *, seed: int = 1) -> s_tir.Schedule:
        """Replay the template on a fresh ``s_tir.Schedule`` with ``assignment``.

        A ``parallel`` step on a loop of one iteration is skipped: TVM would still launch its
        thread pool for it.

        Raises:
            KeyError: if the assignment misses a variable the template reads.
            RuntimeError: if TVM rejects a primitive (a template bug; callers that
                tune record it as a failed candidate).
        """
        sch = s_tir.Schedule(self.func, seed=seed)
        env: dict[str, Any] = {}

        def resolve(a: Any) -> Any:
            if isinstance(a, Sym):
                return env[a.name]
            if isinstance(a, Ref):
                return int(assignment[a.var])
            if isinstance(a, Choice):
                return resolve(a.options[int(assignment[a.index])])
            if isinstance(a, Ordered):
                return resolve(a.select(assignment))
            if isinstance(a, tuple):  # an order inside a loop list is spliced into it
                out: list[Any] = []
                for x in a:
                    if isinstance(x, Ordered) and x.pick is None:
                        out += resolve(x)
                    else:
                        out.append(resolve(x))
                return out
            return a

        for step in self.steps:
            args = [resolve(a) for a in step.args]
            if step.op in _HELPERS:
                result = _HELPERS[step.op](sch, *args)
                for name, value in zip(step.outs, result or (), strict=False):
                    env[name] = value  # a helper's outputs (blocks, loops), when it names any
                continue
            if step.op == "parallel" and _unit_loop(sch, args[0]):
                continue  # one iteration: a parallel launch would only cost (UseAllCores)
            fn = getattr(sch, step.op)
            if step.op in _VARIADIC:
                result = fn(*args[0])
            else:
                result = fn(*args)
            if len(step.outs) == 1:
                # get_loops returns a list even for a single loop
                env[step.outs[0]] = result[0] if step.op == "get_loops" else result
            elif step.outs:
                if len(result) != len(step.outs):
                    raise ValueError(f"{step} returned {len(result)} results")
                for name, value in zip(step.outs, result, strict=True):
                    env[name] = value
        return sch

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self.steps)
