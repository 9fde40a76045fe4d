"""Pad-To-Intrinsic: tensorize stages whose extents the intrinsic tile does not divide.

A stage that maps onto an intrinsic of ``m × n × k`` but has, say, ``N = 1000`` output
features (not a multiple of VNNI's 16) is padded with ``sch.pad_einsum``: its iteration space
grows to the next multiples of the intrinsic tile, a producer block per operand that a padded
axis indexes copies the operand into a zero-filled padded buffer, and (when an output axis is
padded) a consumer block copies the valid region of the padded result into the output. All of
that happens **inside the kernel**, so the padding cost is part of every measured latency (the
original Heron instead rounded ``N = 1000`` up to ``1008`` in the benchmark shape).

Consequences for the other rules:

* The stage's state (``ctx.states[stage].stage``) and its intrinsic match are replaced by padded
  versions (padded extents, padded buffer names), so tiling, C1–C6 and the packed layout see the
  padded problem.
* A packed operand that is a function parameter (the DL Boost weight) is padded as part of
  its one-time pre-packing: the kernel's parameter is declared with the padded shape
  (:func:`with_param_shape`), ``pad_einsum``'s copy of it is inlined, the tensorize rule packs
  the parameter as for any shape, and :meth:`heronlike.space.Space.prepare_args` zero-pads the
  logical weight before packing it. This keeps padded and divisible shapes measured alike (the
  weight layout is never in the measured time). Only when that rewrite is impossible is the
  weight padded and packed inside the kernel (a producer iterating in packed order, one 64-byte
  vector store per ``16 × 4`` tile), and then measured.
* The other padded operands (activations) are padded inside the kernel, measured: producer
  blocks at the root, outer loops fused and ``parallel``, the innermost loop split to one
  vector register and ``vectorize``d.
* The copy-out block becomes the stage's write-back (attached inside the tile loops by
  :class:`~heronlike.rules.tiling.MultiLevelTiling`, vectorised by the intrinsic rule, guarded by
  a predicate at the ragged edge), or, when an epilogue is already fused as the write-back
  (:class:`~heronlike.rules.general.FuseEpilogue`), it is inlined into that epilogue.

A shape that needs no padding is untouched (the rule does not apply), so its space is exactly
what it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.schedule import ScheduleError

from heronlike.dag import Access, Stage
from heronlike.errors import UnsupportedShapeError
from heronlike.intrinsic import IntrinsicMatch, shape_problems

from .base import Rule, RuleContext

#: key of :attr:`StageState.extra`: ``(buffer, block)`` of A's widened copy
#: (:class:`~heronlike.rules.widen.WidenOperand`) when this rule pads A, which then inlines the
#: copy into its padded one instead of copying A twice
WIDENED_COPY = "widened_copy"


def intrinsic_padding(match: IntrinsicMatch) -> dict[str, int]:
    """Axes of the matched stage whose extent the intrinsic tile does not divide, mapped to
    the tile extent they must become a multiple of (empty when nothing needs padding)."""
    intrin = match.intrinsic
    out: dict[str, int] = {}
    for axis, size in (
        (match.m_axis, intrin.m),
        (match.n_axis, intrin.n),
        (match.k_axis, intrin.k),
    ):
        if axis is not None and match.stage.axis(axis).extent % size:
            out[axis] = size
    return out


def _param(func: tirx.PrimFunc, name: str) -> Any:
    return next(p for p in func.params if p.name == name)


def with_param_shape(
    func: tirx.PrimFunc, name: str, shape: tuple[int, ...]
) -> tirx.PrimFunc | None:
    """``func`` with parameter ``name`` declared with the larger ``shape`` (its accesses
    unchanged, so the extra elements are never read unless the schedule pads into them), or
    None when the function cannot be rewritten that way (another rank, strides, an offset).
    Each extent keeps its old type (``T.int64`` in a kernel lowered from Relax). TVM 0.27's
    buffers are variables: the parameter is replaced by a new buffer wherever it appears
    (``tvm_ffi.structural_map``)."""
    old = _param(func, name)
    if len(shape) != len(old.shape) or list(old.strides) or not _is_zero(old.elem_offset):
        return None
    dims = [tirx.const(d, str(o.ty)) for d, o in zip(shape, old.shape, strict=True)]
    new = tirx.decl_buffer(
        dims, old.dtype, old.name, scope=old.scope(), data_alignment=old.data_alignment,
        offset_factor=old.offset_factor,
    )  # fmt: skip

    def grown(var: Any) -> Any:
        return new if var.same_as(old) else var

    return tvm_ffi.structural_map(func, (tvm.ir.expr.Var, grown))


def _is_zero(expr: Any) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == 0


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def padded_scratch(
    func: tirx.PrimFunc, stage: str, multiples: Sequence[int]
) -> tuple[s_tir.Schedule, Any, set[str]]:
    """``pad_einsum`` of block ``stage`` of ``func`` to ``multiples`` (one per block iterator)
    on a scratch schedule, which tells whether TVM can pad the stage and the names and shapes
    it gives the padded buffers and blocks.

    Returns:
        The scratch schedule, the padded block's random variable and the names of the root's
        child blocks before padding (the padding producers are the ones not among them).

    Raises:
        ScheduleError: when TVM cannot pad the stage (``pad_einsum`` needs every access to be
            plain block iterators, which a convolution's ``h * stride + rh`` is not).
    """
    sch = s_tir.Schedule(func)
    before = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    block_rv = sch.get_sblock(stage)
    sch.pad_einsum(block_rv, list(multiples))
    return sch, block_rv, before


class PadToIntrinsic(Rule):
    """Condition: a stage mapped onto an intrinsic whose extents the tile does not divide, not
    yet padded. Apply: ``pad_einsum`` to the tile multiples, schedule the padding producers
    (parallel + vectorised), make the copy-out block the write-back, and continue with the
    padded stage.

    Args:
        vector_bytes: vector register width, for vectorising the padding producers.

    When TVM cannot pad the stage (``pad_einsum`` needs every access to be plain axes, which a
    convolution's ``h * stride + rh`` is not), a target that requires its intrinsic raises;
    one with the general rule set enabled drops the match and the stage is tuned without the
    intrinsic.

    Raises (from ``apply``):
        UnsupportedShapeError: when TVM cannot pad the stage and the target requires the
            intrinsic.
    """

    name = "PadToIntrinsic"

    def __init__(self, vector_bytes: int = 64) -> None:
        self.vector_bytes = vector_bytes

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            stage in ctx.matches
            and st.match is None
            and self.name not in st.applied
            and bool(intrinsic_padding(ctx.matches[stage]))
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        match = ctx.matches[stage]
        pad = intrinsic_padding(match)
        multiples = tuple(pad.get(ax.name, 1) for ax in st.stage.axes)
        # a packed weight that is a parameter is padded with the one-time pre-packing: the
        # kernel takes it already padded (Space.prepare_args pads it with zeros), so the
        # kernel's parameter grows to the padded shape and only a plain copy is left to inline
        func = ctx.template.func
        b = match.b
        if match.intrinsic.pack_b and b.buffer in {p.name for p in ctx.dag.params}:
            shape = tuple(
                _round_up(d, pad.get(ax, 1)) if ax else d for d, ax in zip(b.shape, b.axes)
            )
            if shape != b.shape:
                func = with_param_shape(func, b.buffer, shape) or func
        prepadded = func is not ctx.template.func
        # pad a scratch copy first: it tells the names and shapes TVM gives the padded buffers
        # and blocks, and turns TVM's refusal into a typed error before anything is measured
        try:
            sch, block_rv, before = padded_scratch(func, stage, multiples)
        except ScheduleError as err:
            if not ctx.target.requires_intrinsic:
                # the general rule set runs the stage without the intrinsic
                del ctx.matches[stage]
                return
            lines = str(err).strip().splitlines()
            raise UnsupportedShapeError(
                f"stage {stage} does not fit intrinsic {match.intrinsic.name} "
                f"({'; '.join(shape_problems(match))}) and cannot be padded to it "
                f"({lines[-1] if lines else err})" + ctx.target.general_hint()
            ) from None
        padded_block = sch.get(block_rv)
        shapes = {r.source.name: tuple(int(d) for d in r.source.shape) for r in padded_block.reads}
        w = padded_block.writes[0].source
        shapes[w.name] = tuple(int(d) for d in w.shape)
        renamed = {acc.buffer: f"{acc.buffer}_pad" for acc in st.stage.reads + (st.stage.write,)}
        renamed = {old: new for old, new in renamed.items() if new in shapes}
        copy_of_b = renamed.pop(b.buffer, None) if prepadded else None
        if prepadded:
            shapes[b.buffer] = tuple(int(d) for d in _param(func, b.buffer).shape)
        new_blocks = [
            sch.get(b)
            for b in sch.get_child_blocks(sch.get_sblock("root"))
            if sch.get(b).name_hint not in before
        ]

        def padded(acc: Access) -> Access:
            name = renamed.get(acc.buffer, acc.buffer)
            return replace(acc, buffer=name, shape=shapes.get(name, acc.shape))

        axes = tuple(
            replace(ax, extent=_round_up(ax.extent, pad.get(ax.name, 1))) for ax in st.stage.axes
        )
        new_stage: Stage = replace(
            st.stage,
            axes=axes,
            write=padded(st.stage.write),
            reads=tuple(padded(r) for r in st.stage.reads),
        )
        mac = new_stage.mac
        if mac is not None:
            new_stage = replace(
                new_stage, mac=replace(mac, out=padded(mac.out), a=padded(mac.a), b=padded(mac.b))
            )
        ctx.step("pad_einsum", ctx.block(stage), multiples)
        padded_outputs = set(renamed.values())
        for blk in new_blocks:
            writes = blk.writes[0].source.name
            if writes == copy_of_b:  # a plain copy of the pre-padded weight: read it directly
                (copy,) = ctx.step("get_sblock", blk.name_hint, outs=[f"b_{blk.name_hint}"])
                ctx.step("compute_inline", copy)
            elif (
                writes in padded_outputs
                and writes == padded(match.b).buffer
                and match.intrinsic.pack_b
            ):
                self._schedule_packing(ctx, match, blk.name_hint)
            elif writes in padded_outputs:  # a producer filling a padded operand
                widened, writer = st.extra.get(WIDENED_COPY, (None, None))
                if writes == renamed.get(widened):
                    # A's widened copy (WidenOperand) read only here: one copy, widened and
                    # padded in one pass
                    (copy,) = ctx.step("get_sblock", writer, outs=[f"b_{writer}"])
                    ctx.step("compute_inline", copy)
                self._schedule_producer(ctx, sch, blk.name_hint, blk.writes[0].source.dtype)
            elif st.write_back is None:  # the copy-out of the padded result: the write-back
                (st.write_back,) = ctx.step(
                    "get_sblock", blk.name_hint, outs=[f"b_{blk.name_hint}"]
                )
            else:  # an epilogue is the write-back already: it reads the padded result directly
                (copy,) = ctx.step("get_sblock", blk.name_hint, outs=[f"b_{blk.name_hint}"])
                ctx.step("compute_inline", copy)
        st.stage = new_stage
        ctx.matches[stage] = replace(match, stage=new_stage, a=padded(match.a), b=padded(match.b))
        ctx.template.func = func

    def _schedule_packing(self, ctx: RuleContext, match: IntrinsicMatch, name: str) -> None:
        """The producer of a padded operand that the intrinsic reads packed (DL Boost's weight,
        re-laid out ``[.., n // 16, k // 4, n % 16, k % 4]`` by the tensorize rule): iterate in
        the packed order, so that each innermost ``n × k`` tile (64 bytes for VNNI) is one
        contiguous vector store; all tiles in one ``parallel`` loop."""
        b, intrin = match.b, match.intrinsic
        n_dim, k_dim = b.axes.index(match.n_axis), b.axes.index(match.k_axis)
        (blk,) = ctx.step("get_sblock", name, outs=[f"b_{name}"])
        loops = ctx.step("get_loops", blk, outs=[f"{name}.l{i}" for i in range(len(b.axes))])
        n_o, n_i = ctx.step(
            "split", loops[n_dim], (None, intrin.n), outs=[f"{name}.no", f"{name}.ni"]
        )
        k_o, k_i = ctx.step(
            "split", loops[k_dim], (None, intrin.k), outs=[f"{name}.ko", f"{name}.ki"]
        )
        outer = [lp for d, lp in enumerate(loops) if d not in (n_dim, k_dim)] + [n_o, k_o]
        ctx.step("reorder", tuple(outer + [n_i, k_i]))
        (tiles,) = ctx.step("fuse", tuple(outer), outs=[f"{name}.tiles"])
        ctx.step("parallel", tiles)
        (tile,) = ctx.step("fuse", (n_i, k_i), outs=[f"{name}.tile"])
        ctx.step("vectorize", tile)

    def _schedule_producer(
        self, ctx: RuleContext, sch: s_tir.Schedule, name: str, dtype: str
    ) -> None:
        """Root-level padding copy: fuse the outer loops into one ``parallel`` loop and
        vectorise a divisor of the innermost extent that fits one vector register. A 1-D
        operand (GEMV's vector: ``K`` elements against ``M·K`` multiply-adds) stays serial."""
        extents = [int(sch.get(lp).extent) for lp in sch.get_loops(sch.get_sblock(name))]
        if len(extents) < 2:
            return
        (blk,) = ctx.step("get_sblock", name, outs=[f"b_{name}"])
        loops = ctx.step("get_loops", blk, outs=[f"{name}.l{i}" for i in range(len(extents))])
        lanes = max(1, self.vector_bytes // (tvm.DataType(dtype).bits // 8))
        vec = _largest_divisor(extents[-1], lanes)
        inner = loops[-1]
        if len(loops) == 2:
            outer = loops[0]
        else:
            (outer,) = ctx.step("fuse", tuple(loops[:-1]), outs=[f"{name}.outer"])
        ctx.step("parallel", outer)
        if vec < extents[-1]:
            _, inner = ctx.step("split", inner, (None, vec), outs=[f"{name}.row", f"{name}.vec"])
        if vec > 1:
            ctx.step("vectorize", inner)
