"""Widen-Operand: give a tensorized stage its A operand in the dtype its intrinsic reads.

An intrinsic may compute on a u8 operand but read it pre-widened
(:attr:`heronlike.intrinsic.Intrinsic.a_storage_dtype`: AVX2's ``vpmaddwd`` broadcasts int16
pairs from memory instead of zero-extending every pair in the call, which costs three vector
instructions per row of the register tile and made that loop 1.06-3.2× slower on a Zen 3:
``benchmarks/pmaddwd_loops.py``, docs/results.md). The stage then reads a copy of A in that
dtype, written before the stage runs:

* where A is already a materialised operand (a convolution's zero padding ``Xp``, SCAN's
  generated matrix) that only this stage reads, that operand itself is stored in the wider
  dtype (:func:`retype_buffer`): no extra pass;
* otherwise (A a parameter, or read by other stages too) a copy of A, retyped, is written at
  the root, its outer loops fused and ``parallel``, its innermost loop vectorised, like any
  materialised operand, or inside the stage's ``parallel`` loop, each task widening the rows
  it reads (a finish knob, :class:`PlaceWidenedCopy`). It holds what the stage reads, indexed
  by the stage's iterators (``reindex``), where that is less than all of A (a strided 1 × 1
  convolution: a quarter of a 2-D input, an eighth of a 3-D one), else all of A
  (``cache_read``). Its cost (``M·K`` element copies against ``M·N·K`` multiply-adds for a
  GEMM) is inside every measured latency.

Both rewrite the template's PrimFunc before any schedule primitive runs on it, so every
candidate shares them; the stage's accesses (and so C5's footprints, which count A's bytes)
see the wider dtype. Widening a zero-extended u8 to int16 is exact.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.tirx.analysis import undefined_vars

from heronlike.dag import Access, ComputeDAG
from heronlike.template import Choice, Sym

from .base import Rule, RuleContext
from .pad import WIDENED_COPY, intrinsic_padding, padded_scratch

#: key of :attr:`StageState.extra`: ``(block, lanes)`` of a new widened copy of A that
#: :class:`PlaceWidenedCopy` places once the stage has its parallel loop
WIDENED_COPY_AT = "widened_copy_at"


def retype_buffer(func: tirx.PrimFunc, name: str, dtype: str) -> tirx.PrimFunc:
    """``func`` with its intermediate buffer ``name`` stored in ``dtype``: every store into
    it casts its value to ``dtype``, every load reads the new buffer (whose consumers cast
    it as they cast the old one). Exact when every value stored fits ``dtype``.

    Raises:
        KeyError: ``func`` allocates no buffer called ``name``.
    """
    old = _allocated(func).get(name)
    if old is None:
        raise KeyError(f"{name} is not an intermediate buffer of the function")
    new = tirx.decl_buffer(
        old.shape, dtype, old.name, scope=old.scope(), elem_offset=old.elem_offset,
        data_alignment=old.data_alignment, offset_factor=old.offset_factor,
    )  # fmt: skip

    def buffer(var: Any) -> Any:
        return new if var.same_as(old) else var

    def store(node: Any) -> Any:
        if node.buffer.same_as(new):
            return tirx.BufferStore(new, tirx.Cast(dtype, node.value), list(node.indices))
        return node

    def load(node: Any) -> Any:  # a load's node records its type: rebuilt from the buffer
        if node.source.same_as(new):
            return tirx.BufferLoad(new, list(node.indices))
        return node

    func = tvm_ffi.structural_map(func, (tvm.ir.expr.Var, buffer))
    return tvm_ffi.structural_map(func, [(tirx.BufferStore, store), (tvm.ir.TensorLoad, load)])


def _allocated(func: tirx.PrimFunc) -> dict[str, Any]:
    """The buffers ``func``'s root block allocates (its intermediate buffers), by name."""
    sch = s_tir.Schedule(func)
    return {str(b.name): b for b in sch.get(sch.get_sblock("root")).alloc_buffers}


def widen_operand(
    func: tirx.PrimFunc, stage: str, buffer: str, dtype: str
) -> tuple[tirx.PrimFunc, str, str | None]:
    """``func`` with block ``stage`` reading operand ``buffer`` in ``dtype``:
    ``(func, name of the buffer it now reads, name of the block writing it where that is a
    new copy, else None)``. A buffer written by one block and read by ``stage`` alone is
    retyped in place; any other (a parameter, an operand other blocks read) is copied and the
    copy retyped: the elements ``stage`` reads, indexed by its iterators (``reindex``), where
    that is fewer than the buffer holds (a strided 1 × 1 convolution reads a quarter of a 2-D
    input, an eighth of a 3-D one), else the buffer (``cache_read``).

    Raises:
        ValueError: ``stage`` does not read ``buffer``.
    """
    sch = s_tir.Schedule(func)
    block = sch.get_sblock(stage)
    reads = [r.source.name for r in sch.get(block).reads]
    if buffer not in reads:
        raise ValueError(f"stage {stage} does not read {buffer}")
    producers = [b for b in sch.get_producers(block) if sch.get(b).writes[0].source.name == buffer]
    if len(producers) == 1 and buffer in _allocated(func):
        consumers = sch.get_consumers(producers[0])
        if len(consumers) == 1 and sch.get(consumers[0]).name_hint == stage:
            return retype_buffer(func, buffer, dtype), buffer, None
    index = reads.index(buffer)
    whole = math.prod(int(d) for d in sch.get(block).reads[index].source.shape)
    if _reindexed_size(sch.get(block), index) < whole:
        copy = sch.reindex(block, ("read", index))  # its block: X_reindex_reindex
    else:
        copy = sch.cache_read(block, index, "global")
    name = str(sch.get(copy).writes[0].source.name)
    return retype_buffer(sch.mod["main"], name, dtype), name, str(sch.get(copy).name_hint)


def _reindexed_size(block: Any, index: int) -> int:
    """Elements of ``reindex``'s copy of read ``index`` of ``block``: one per value of the
    block iterators its indices use (a strided 1 × 1 convolution's ``X[n, 2h, 2w, ci]``: the
    ``h × w × ci`` elements it reads, where a copy of the buffer holds 4× as many)."""
    used = {v.name for rng in block.reads[index].region for v in undefined_vars(rng.min)}
    return math.prod(int(iv.dom.extent) for iv in block.iter_vars if iv.var.name in used)


class WidenOperand(Rule):
    """Condition: a stage mapped onto an intrinsic whose :attr:`a_storage_dtype` differs from
    the dtype the stage reads A in, not yet widened, and (where the stage needs padding to
    the intrinsic) one TVM can pad once A is widened.

    Apply: :func:`widen_operand` on the template's function; the stage's accesses and match
    read the wider A; a new copy is left to :class:`PlaceWidenedCopy` (vectorised to
    ``vector_bytes``), a retyped producer keeps its own rule
    (:class:`~heronlike.rules.inline.MaterializeOperand`), now vectorised at the wider dtype's
    lanes.

    Args:
        vector_bytes: vector register width, for vectorising the copy.
    """

    name = "WidenOperand"

    def __init__(self, vector_bytes: int = 32) -> None:
        self.vector_bytes = vector_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        m = ctx.matches.get(stage)
        return (
            m is not None
            and st.match is None
            and self.name not in st.applied
            and m.intrinsic.a_storage_dtype not in (None, m.a.dtype)
            and _paddable(ctx, stage)
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        st.applied.append(self.name)
        match = ctx.matches[stage]
        dtype = str(match.intrinsic.a_storage_dtype)
        func, name, writer = widen_operand(ctx.template.func, stage, match.a.buffer, dtype)
        ctx.template.func = func

        fresh = ComputeDAG(func, ctx.dag.outputs).stage(stage)
        a = next(r for r in fresh.reads if r.buffer == name)  # a reindexed copy: new indices

        def wide(acc: Access) -> Access:
            return a if acc.buffer == match.a.buffer else acc

        mac = st.stage.mac
        st.stage = replace(
            st.stage,
            reads=tuple(wide(r) for r in st.stage.reads),
            mac=None if mac is None else replace(mac, a=wide(mac.a)),
        )
        ctx.matches[stage] = replace(match, stage=st.stage, a=wide(match.a))
        if writer is not None:  # a new copy
            if set(intrinsic_padding(match)) & set(a.axes):
                # PadToIntrinsic copies A again, padded: it inlines this copy into its own
                st.extra[WIDENED_COPY] = (name, writer)
                return
            (block,) = ctx.step("get_sblock", writer, outs=[f"b_{writer}"])
            lanes = self.vector_bytes // (tvm.DataType(dtype).bits // 8)
            # placed once the stage has its parallel loop: PlaceWidenedCopy
            st.extra[WIDENED_COPY_AT] = (block, lanes)
            return
        producer = next(
            (s for s, other in ctx.states.items() if other.stage.write.buffer == name), None
        )
        if producer is not None:
            pst = ctx.states[producer]
            pst.stage = replace(pst.stage, write=replace(pst.stage.write, dtype=dtype))


class PlaceWidenedCopy(Rule):
    """Condition: :class:`WidenOperand` gave the stage a new copy of A, not yet placed.

    Apply: a finish knob ``<stage>.widened_copy`` (:attr:`heronlike.csp.Var.finish`: the
    search holds it at 0, the tune's variant trials measure its best candidates with 1)
    chooses where the copy is written: 0, a root-level pass over all of A before the stage
    runs (fused outer loops ``parallel``, innermost loop vectorised); 1, inside the stage's
    ``parallel`` loop (:func:`heronlike.template.materialize_at`), each task widening the rows
    of A it reads just before it reads them, into a buffer of that size (TVM's
    ``CompactBufferAllocation``). The second writes no ``2·M·K``-byte copy to memory and reads
    none back, but widens a row once per task that reads it. On a Zen 1 (AVX2, 2 cores,
    2026-12-06; docs/results.md, "The widened copy inside the parallel loop"), on the fastest
    schedules of short tunes: 1.07–1.09× on a batched GEMM whose tasks each hold all 64
    columns (``16 × 512 × 64 × 512``, B4), 0.93–1.02× where the columns are split over tasks
    (a ``1024³`` GEMM, a ``1 × 1`` convolution). Which is faster depends on the tiles, so it is
    settled by measurement at the finish rather than searched: in 16-trial tunes, B4 1.06×
    and 1.11× over a copy always at the root, the other products even. Without a parallel
    loop the copy is a root-level pass.

    Args:
        level: the tiling level of the stage's parallel loop.
        settle: False for a copy always at the root, without the knob (``dlboost
            -widen-a=root``).
    """

    name = "PlaceWidenedCopy"

    def __init__(self, level: str = "P", settle: bool = True) -> None:
        self.level = level
        self.settle = settle

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        return WIDENED_COPY_AT in ctx.states[stage].extra

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        block, lanes = st.extra.pop(WIDENED_COPY_AT)
        tasks = st.level(self.level)
        if not tasks or not self.settle:
            ctx.step("materialize_at", block, None, lanes)
            return
        knob = ctx.csp.var(
            f"{stage}.widened_copy",
            0,
            1,
            knob=True,
            finish=True,
            doc=f"where A's widened copy is written: 0 the root, 1 in {tasks[0].sym}",
        )
        ctx.step("materialize_at", block, Choice(knob, (None, Sym(tasks[0].sym))), lanes)


def _paddable(ctx: RuleContext, stage: str) -> bool:
    """Whether the stage needs no padding to its intrinsic or TVM can pad it once A is
    widened (where it cannot, the stage leaves the intrinsic or is an error:
    :class:`~.pad.PadToIntrinsic`). Judged on the widened function: a reindexed copy of A
    has plain indices that ``pad_einsum`` can pad where the strided original has not."""
    match = ctx.matches[stage]
    pad = intrinsic_padding(match)
    if not pad:
        return True
    multiples = [pad.get(ax.name, 1) for ax in ctx.states[stage].stage.axes]
    dtype = str(match.intrinsic.a_storage_dtype)
    func, _, _ = widen_operand(ctx.template.func, stage, match.a.buffer, dtype)
    try:
        padded_scratch(func, stage, multiples)
    except s_tir.schedule.ScheduleError:
        return False
    return True
