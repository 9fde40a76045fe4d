"""VTA rules: tile a GEMM, a batched GEMM or a 2-D convolution (optionally followed by an
element-wise requantisation epilogue) into VTA tiles and constrain the tiles by VTA's buffers
and ISA.

The stage ``C[i, j] += A[i, k] * B[j, k]`` (already matched by
:class:`~heronlike.rules.tensorize.Tensorize` onto the ``BATCH × BLOCK_OUT × BLOCK_IN`` GEMM
intrinsic, 1 × 16 × 16 by default) is tiled as

``i.S0  j.S0  j.V  k.R0 | k.R1  i.S1  j.S1 | j.T  k.T``   (``order = 0``; ``order = 1`` swaps
``i.S0`` and ``j.S0``)

* ``i.S0, j.S0`` walk the output tiles (``order`` picks which is outer: it decides which
  operand a program whose K fits one tile keeps resident across neighbouring tiles);
* ``j.V`` is the virtual thread (``vthreads`` ∈ {1, 2}): the output tiles of one ``(i.S0,
  j.S0)`` group alternate between two halves of every SRAM buffer, so one thread's loads overlap
  the other's GEMM (vta.md §2.5). Making it a split of ``j`` keeps the tile count a multiple
  of the thread count by construction (C1);
* ``k.R0`` is the loop of DMA loads (one input and one weight tile per iteration);
* ``k.R1, i.S1, j.S1`` are one GEMM instruction: ``k.R1`` its ``iter_out`` loop, ``i.S1 ×
  j.S1`` its micro-ops (``fold = 1`` moves ``i.S1`` into ``iter_in`` instead: ``j.S1``
  micro-ops);
* ``j.T, k.T`` (and BATCH = 1 rows of ``i``) are the intrinsic, tensorized.

**Batched GEMM** (``heronlike.ops.bmm``): the batch axis stays one outermost loop ``b`` (one
GEMM per batch; a tile never spans batches), the rest is tiled as above.

**2-D convolution** (``heronlike.ops.c2d``, N = 1, channels multiples of 16), as an implicit
GEMM (:mod:`heronlike.dla_targets.vta.lowering`): the output rows ``h`` and columns ``w`` are
split ``S0, S1`` (a tile is ``h.S1 × w.S1`` output pixels, ``tile_m`` their product), ``co``
as ``j`` and ``ci`` as ``k`` above; the kernel window ``rh, rw`` stays whole inside the GEMM
(``rw`` its ``iter_in``, ``rh`` unrolled into the micro-ops):

``n  h.S0  w.S0  co.S0  co.V  ci.R0 | ci.R1  rw  rh  h.S1  w.S1  co.S1 | co.T  ci.T``

**Epilogue** (``heronlike.ops.requantize``, or any element-wise stages after the matched one,
inlined into one output stage by ``AlwaysInline``): read as a chain of VTA ALU operations on
the accumulator (:func:`_epilogue`): ``+ bias[co]`` (a 1-D int32 parameter indexed by the
output channel), ``± c``, ``>> c``, ``min(·, c)``, ``max(·, c)`` with ``c`` a 16-bit signed
immediate, then a cast to int8 (one 8-bit store per tile) or none (an int32 result: four byte
planes). Anything else (a multiply, a reduction, another output, a read of ``C`` elsewhere
than its own element) is an ``UnsupportedComputeError`` naming it. The epilogue stage is
fused into the accumulator stage: ``reverse_compute_at`` at ``j.V`` (each thread's finished
output tile, where the ALU runs), and the space is otherwise unchanged; its operations are
``vta.*`` compute constants (``out_int8``, ``bias``, ``bias_arg``, ``alu_ops``,
``alu{i}_op``/``_imm``/``_src``).

Tile sizes in elements of the buffers: input ``tile_m · tile_k`` (C2D: ``tile_k`` channel
blocks of the ``in_tile_h × in_tile_w`` input window, ``in_tile_h = (h.S1 − 1)·stride +
(KH − 1)·dilation + 1``), weight ``tile_n · tile_k`` (C2D: ``× KH·KW``), accumulator ``tile_m ·
tile_n``. :class:`VTABufferLimits` bounds them (Heron Table 3 plus what it left out):

* input, weight, accumulator bytes × vthreads ≤ each buffer's capacity (C5); with a bias the
  accumulator holds ``(tile_m + 1) · tile_n`` per thread (the bias tile beside the output tile);
* micro-ops resident at once (GEMM and ALU kernels of every thread, plus the ``tile_n``-micro-op
  bias-add kernel with a bias) ≤ the micro-op buffer;
* instruction fields within their encoding widths: ``iter_out``/``iter_in`` (14 bits), the
  folded loop's index factors (accumulator and input index widths);
* **accumulator hazard**, exactly as the hardware needs it (vta.md §2.2, §2.5; Heron's
  ``2 ≤ access_cycle``): within the expanded micro-op stream of one GEMM instruction an
  accumulator address may repeat only ≥ 3 micro-ops later. Every GEMM the lowering emits walks
  its ``tile_m · tile_n`` distinct accumulators in the same order once per iteration of its
  loops (``tile_k`` iterations; C2D ``tile_k · KH · KW``), so the repeat distance is ``tile_m ·
  tile_n`` and a repeat exists only with more than one iteration: the constraint is
  ``(iterations − 1) · (3 − tile_m · tile_n) ≤ 0``, i.e. *one iteration, or ≥ 3 accumulators*.
  (The earlier rule demanded ≥ 3 accumulators always, which left GEMMs with fewer than 3
  output blocks, e.g. 2 × 16 × 32, without a schedule.) Reset GEMMs write every address once.

Every variable the code generator reads is aliased under a fixed ``vta.*`` name
(``vta.tile_m``, ``vta.m_blocks`` …), so it reads the assignment without knowing the stage.
This module knows VTA only through :class:`VTALimits` (plain numbers the target fills in).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from heronlike.csp import Eq, In, Le, Prod, Select, Sum
from heronlike.errors import (
    TVM_ERRORS,
    UnsupportedComputeError,
    UnsupportedDtypeError,
    UnsupportedShapeError,
)
from heronlike.intrinsic import structural_match
from heronlike.template import Choice, PackedLayout, Sym

from .base import ConstraintRule, Rule, RuleContext

#: names of the aliased variables the code generator reads (all computes)
PARAMS = (
    "m_blocks",
    "n_blocks",
    "k_blocks",
    "tile_m",
    "tile_n",
    "tile_k",
    "vthreads",
    "order",
    "fold",
    "kind",
    "batch",
)
#: the extra ones of a 2-D convolution
CONV_PARAMS = (
    "in_h",
    "in_w",
    "out_h",
    "out_w",
    "kernel_h",
    "kernel_w",
    "stride",
    "pad",
    "dilation",
    "tile_h",
    "tile_w",
)
#: ``vta.kind`` values (as :mod:`heronlike.dla_targets.vta.lowering`)
KIND_GEMM, KIND_BMM, KIND_C2D = 0, 1, 2
#: ``vta.alu{i}_op`` values: VTA's ALU opcodes (vta.md §2.3; as ``dla_targets.vta.isa.AluOp``)
ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR = 0, 1, 2, 3
#: ``vta.alu{i}_src`` values: the second operand is the immediate or the bias tile
SRC_IMM, SRC_BIAS = 0, 1
#: largest zero padding one VTA LOAD adds per side (4-bit pad fields, vta.md §2.3)
MAX_PAD = 15


@dataclass(frozen=True)
class VTALimits:
    """What the VTA rules need to know about the hardware (all from ``VTAConfig``).

    Attributes:
        inp_bytes, wgt_bytes, acc_bytes: on-chip buffer capacities in bytes.
        uop_depth: micro-ops the micro-op buffer holds.
        inp_elem_bytes, wgt_elem_bytes, acc_elem_bytes: bytes of one tensor element of each
            buffer (16, 256, 64 by default).
        loop_iter_bits: width of ``iter_out``/``iter_in`` (14).
        acc_index_bits, inp_index_bits, wgt_index_bits: widths of index factors (11, 11, 10).
        stride_bits: width of a DMA's ``x_stride`` and ``y_size``/``x_size`` (16).
        hazard_distance: smallest legal distance between GEMM writes of one accumulator (3).
        block_in, block_out: the intrinsic's k and n (16, 16).
        max_vthreads: virtual threads the space may use (2).
        alu_imm_bits: width of the ALU's signed immediate (16); acc_bits: accumulator lane
            width (32, the largest shift + 1).
    """

    inp_bytes: int
    wgt_bytes: int
    acc_bytes: int
    uop_depth: int
    inp_elem_bytes: int
    wgt_elem_bytes: int
    acc_elem_bytes: int
    loop_iter_bits: int
    acc_index_bits: int
    inp_index_bits: int
    wgt_index_bits: int
    stride_bits: int
    hazard_distance: int
    block_in: int
    block_out: int
    max_vthreads: int = 2
    alu_imm_bits: int = 16
    acc_bits: int = 32


@dataclass(frozen=True)
class _Epilogue:
    """An element-wise epilogue after the matched stage, as VTA ALU work (module docstring).

    Attributes:
        stage: the output stage (the other epilogue stages are inlined into it).
        ops: ``(ALU opcode, immediate, operand)`` in execution order (innermost first);
            operand :data:`SRC_IMM` or :data:`SRC_BIAS` (immediate ignored).
        out_int8: the result is cast to int8 (one 8-bit store) rather than kept int32.
        bias: name of the per-output-channel int32 bias parameter, or None.
        bias_arg: its position among the compute's parameters (-1 without bias).
    """

    stage: str
    ops: tuple[tuple[int, int, int], ...]
    out_int8: bool
    bias: str | None
    bias_arg: int

    def constants(self) -> dict[str, int]:
        """The ``vta.*`` compute constants that describe it to the code generator."""
        out = {
            "out_int8": int(self.out_int8),
            "bias": int(self.bias is not None),
            "bias_arg": self.bias_arg,
            "alu_ops": len(self.ops),
        }
        for i, (op, imm, src) in enumerate(self.ops):
            out.update({f"alu{i}_op": op, f"alu{i}_imm": imm, f"alu{i}_src": src})
        return out


@dataclass
class _Shape:
    """What the VTA rules need to know about the matched stage."""

    kind: int
    m: str  # axis names (conv: the batch axis n of extent 1)
    n: str
    k: str
    batch_axis: str | None = None
    batch: int = 1
    conv: dict[str, int] = field(default_factory=dict)
    h: str = ""  # conv output row / column axes and kernel window axes
    w: str = ""
    rh: str = ""
    rw: str = ""
    epilogue: _Epilogue | None = None


_EPILOGUE_FORM = (
    "the VTA target fuses an element-wise epilogue made of a per-output-channel int32 bias "
    "add, + or - a constant, >> a constant, min/max with constants and a final cast to int8 "
    "or none (int32) (VTA ALU ADD, SHR, MIN, MAX on the accumulator, vta.md §2.3, §2.4)"
)


def _epilogue(
    ctx: RuleContext, stage: str, after: list[str], n_axis: str, lim: VTALimits
) -> _Epilogue:
    """Read the epilogue stages ``after`` the matched ``stage`` as a chain of ALU operations.

    The epilogue stages are inlined into the output stage on a scratch schedule (as
    :class:`~heronlike.rules.inline.AlwaysInline` will inline them in the template), and the
    output's value is read as ``cast(op_n(… op_1(C[idx]) …))``: each ``op`` is ``x + bias[co]``
    (a 1-D int32 parameter indexed by the output channel), ``x ± c``, ``x >> c``
    (``0 ≤ c < acc_bits``), ``min(x, c)`` or ``max(x, c)`` with ``c`` a signed
    ``alu_imm_bits``-bit constant; the final cast is to int8 (int32 output: no cast).

    Raises:
        UnsupportedComputeError: a reduction after the stage, more than one output, an
            epilogue that reads ``C`` elsewhere than at its own element, another operation,
            a constant outside the ALU immediate, two different bias tensors.
        UnsupportedDtypeError: an output dtype other than int8 or int32.
    """
    from tvm import s_tir

    dag = ctx.dag
    mac = dag.stage(stage)
    c_buf = mac.write.buffer
    reducing = [s for s in after if dag.stage(s).is_reduction]
    outputs = [s for s in after if dag.stage(s).is_output]
    if reducing or mac.is_output or len(outputs) != 1:
        raise UnsupportedComputeError(
            f"{_EPILOGUE_FORM}, with one output; after stage {stage} the compute has "
            f"{', '.join(after)} (reductions: {reducing or 'none'}, outputs: "
            f"{', '.join(s for s in [stage, *after] if dag.stage(s).is_output)})"
        )
    (out,) = outputs
    sch = s_tir.Schedule(dag.func)
    for s in after:
        if s != out:
            try:
                sch.compute_inline(sch.get_sblock(s))
            except (s_tir.ScheduleError, *TVM_ERRORS):
                raise UnsupportedComputeError(
                    f"{_EPILOGUE_FORM}; stage {s} cannot be inlined into {out}"
                ) from None
    block = sch.get(sch.get_sblock(out))
    store = block.body
    ivars = [iv.var for iv in block.iter_vars]
    c_dim = mac.write.axes.index(n_axis)
    c_shape = tuple(int(d) for d in mac.write.shape)
    out_shape = tuple(int(d) for d in store.buffer.shape)
    if out_shape != c_shape or not _plain(store.indices, ivars):
        raise UnsupportedComputeError(
            f"{_EPILOGUE_FORM}; output {store.buffer.name} {out_shape} is not element-wise "
            f"over {c_buf} {c_shape}"
        )
    params = [p.name for p in dag.params]
    imm_lo, imm_hi = -(1 << (lim.alu_imm_bits - 1)), (1 << (lim.alu_imm_bits - 1)) - 1
    biases: set[str] = set()

    def fail(e: Any, why: str = "") -> UnsupportedComputeError:
        what = why or f"{e} is none of these"
        return UnsupportedComputeError(
            f"{_EPILOGUE_FORM}; stage {out} computes {store.value}: {what}"
        )

    def const(e: Any, lo: int = imm_lo, hi: int = imm_hi) -> int | None:
        if type(e).__name__ != "IntImm":
            return None
        v = int(e.value)
        if not lo <= v <= hi:
            raise fail(e, f"constant {v} outside [{lo}, {hi}]")
        return v

    def is_bias(e: Any) -> bool:
        if type(e).__name__ != "TensorLoad" or e.source.name not in params:
            return False
        src = e.source
        ok = (
            src.name not in dag.outputs
            and str(e.ty) == "int32"
            and tuple(int(d) for d in src.shape) == (c_shape[c_dim],)
            and _plain(e.indices, [ivars[c_dim]])
        )
        if ok:
            biases.add(src.name)
        return ok

    def walk(e: Any) -> list[tuple[int, int, int]]:
        kind = type(e).__name__
        if kind == "TensorLoad" and e.source.name == c_buf and _plain(e.indices, ivars):
            return []
        if kind == "Cast" and str(e.ty) == "int32" and str(e.value.ty) == "int32":
            return walk(e.value)
        if kind in ("Add", "Min", "Max"):
            op = {"Add": ALU_ADD, "Min": ALU_MIN, "Max": ALU_MAX}[kind]
            for x, y in ((e.a, e.b), (e.b, e.a)):
                v = const(y)
                if v is not None:
                    return [*walk(x), (op, v, SRC_IMM)]
                if op == ALU_ADD and is_bias(y):
                    return [*walk(x), (ALU_ADD, 0, SRC_BIAS)]
        if kind == "Sub":
            v = const(e.b, -imm_hi, -imm_lo)
            if v is not None:
                return [*walk(e.a), (ALU_ADD, -v, SRC_IMM)]
        if kind == "RShift":
            v = const(e.b, 0, lim.acc_bits - 1)
            if v is not None:
                return [*walk(e.a), (ALU_SHR, v, SRC_IMM)]
        raise fail(e)

    value, dtype = store.value, str(store.buffer.dtype)
    if dtype == "int8":
        if type(value).__name__ != "Cast" or str(value.value.ty) != "int32":
            raise fail(value, "an int8 result must be a cast of the int32 epilogue")
        ops = walk(value.value)
    elif dtype == "int32":
        ops = walk(value)
    else:
        raise UnsupportedDtypeError(
            f"the VTA target stores an epilogue's result as int8 (one 8-bit store) or int32 "
            f"(four byte planes); stage {out} writes {dtype}"
        )
    if len(biases) > 1:
        raise fail(value, f"one bias tensor at most, not {sorted(biases)}")
    bias = next(iter(biases), None)
    return _Epilogue(
        out, tuple(ops), dtype == "int8", bias, params.index(bias) if bias is not None else -1
    )


def _plain(indices: Any, ivars: list[Any]) -> bool:
    """``indices`` are exactly the variables ``ivars``, in order."""
    return len(indices) == len(ivars) and all(i.same_as(v) for i, v in zip(indices, ivars))


def _conv_geometry(ctx: RuleContext, stage: str, a_access: object) -> tuple[dict[str, int], ...]:
    """Stride, dilation, padding and axes of a convolution stage from its input access."""
    st = ctx.states[stage].stage
    idx = [ix for ix in a_access.index if ix is not None and len(ix.terms) > 1]  # type: ignore[attr-defined]
    kinds = {ax.name: ax.kind for ax in st.axes}
    ext = {ax.name: int(ax.extent) for ax in st.axes}
    dims = []
    for ix in idx:
        sp = [(a, c) for a, c in ix.terms if kinds.get(a) == "S"]
        rd = [(a, c) for a, c in ix.terms if kinds.get(a) == "R"]
        if len(sp) != 1 or len(rd) != 1 or ix.const != 0:
            raise UnsupportedComputeError(
                f"the VTA target runs 2-D convolutions with input index h·stride + r·dilation; "
                f"stage {stage} reads its input at {ix}"
            )
        dims.append((sp[0], rd[0]))
    return tuple({"axis": a, "coeff": c, "extent": ext[a]} for pair in dims for a, c in pair)


def _analyse(ctx: RuleContext, stage: str, lim: VTALimits) -> _Shape:
    """Classify the matched stage: GEMM, batched GEMM or NHWC 2-D convolution, and the
    epilogue after it if any (:func:`_epilogue`).

    Raises:
        UnsupportedComputeError: other stages (besides the input's zero padding and the
            epilogue), an epilogue the ALU cannot run (:func:`_epilogue`), more than one batch
            axis, a convolution of other than 2 spatial dimensions or with non-affine input
            indices.
        UnsupportedDtypeError: an epilogue result other than int8 or int32.
        UnsupportedShapeError: a convolution with batch ≠ 1, or padding a VTA LOAD cannot add
            (more than 15, or wider than the kernel window so a tile would read only padding).
    """
    st = ctx.states[stage]
    found = structural_match(st.stage)
    if found is None:  # pragma: no cover - the stage matched an intrinsic
        raise UnsupportedComputeError(f"stage {stage} is not a multiply-accumulate")
    a_acc, _, roles = found
    others = [s for s in ctx.dag.stages if s.name != stage]
    producers = {s.name for s in others if s.write.buffer == a_acc.buffer and s.is_injective}
    after = sorted(nx.descendants(ctx.dag.graph, stage))
    extra = [s.name for s in others if s.name not in producers and s.name not in after]
    if extra or len(producers) > 1:
        raise UnsupportedComputeError(
            "the VTA target runs a GEMM, batched GEMM or 2-D convolution, alone or followed by "
            "an element-wise requantisation epilogue; the compute has "
            + ", ".join(s.name for s in ctx.dag.stages)
        )
    if len(roles["n"]) != 1 or len(roles["k"]) != 1 or len(roles["m"]) != 1:
        raise UnsupportedComputeError(
            f"the VTA target runs C[m, n] += A[m, k] * B[n, k] with one m, n and k axis "
            f"(plus a batch or conv window); stage {stage} has axes {dict(roles)}"
        )
    ext = {ax.name: int(ax.extent) for ax in st.stage.axes}
    m, n, k = roles["m"][0], roles["n"][0], roles["k"][0]
    epi = _epilogue(ctx, stage, after, n, lim) if after else None
    compound = [ax.name for ax in st.stage.axes if ax.name not in (m, n, k, *roles["batch"])]
    if not compound:
        if len(roles["batch"]) > 1:
            raise UnsupportedComputeError(f"stage {stage}: one batch axis at most, not {roles}")
        if roles["batch"]:
            b = roles["batch"][0]
            return _Shape(KIND_BMM, m, n, k, batch_axis=b, batch=ext[b], epilogue=epi)
        return _Shape(KIND_GEMM, m, n, k, epilogue=epi)
    geo = _conv_geometry(ctx, stage, a_acc)
    if roles["batch"] or len(geo) != 4 or len(compound) != 4:
        raise UnsupportedComputeError(
            f"the VTA target runs 2-D convolutions (two output and two kernel-window axes); "
            f"stage {stage} has axes {dict(roles)} and {compound}"
        )
    (h, rh), (w, rw) = (geo[0], geo[1]), (geo[2], geo[3])
    if h["coeff"] != w["coeff"] or rh["coeff"] != rw["coeff"]:
        raise UnsupportedComputeError(f"stage {stage}: unequal strides or dilations")
    # input (unpadded) extents: the producer Xp pads the parameter X by `pad` on each side
    a_shape = a_acc.shape
    x_shape = a_shape
    if producers:
        (prod,) = [s for s in others if s.name in producers]
        x_shape = prod.reads[0].shape if prod.reads else a_shape
    hdim = next(d for d, ix in enumerate(a_acc.index) if ix is not None and h["axis"] in ix.axes)
    wdim = next(d for d, ix in enumerate(a_acc.index) if ix is not None and w["axis"] in ix.axes)
    pad = (a_shape[hdim] - x_shape[hdim]) // 2
    if (a_shape[wdim] - x_shape[wdim]) // 2 != pad:
        raise UnsupportedComputeError(f"stage {stage}: unequal padding of rows and columns")
    conv = {
        "in_h": int(x_shape[hdim]),
        "in_w": int(x_shape[wdim]),
        "out_h": h["extent"],
        "out_w": w["extent"],
        "kernel_h": rh["extent"],
        "kernel_w": rw["extent"],
        "stride": h["coeff"],
        "pad": pad,
        "dilation": rh["coeff"],
    }
    if ext[m] != 1:
        raise UnsupportedShapeError(
            f"the VTA target runs convolutions of batch 1 (BATCH = 1, one image per program); "
            f"stage {stage} has batch {ext[m]}"
        )
    window = min(conv["kernel_h"] - 1, conv["kernel_w"] - 1) * conv["dilation"]
    if pad > min(MAX_PAD, window):
        raise UnsupportedShapeError(
            f"padding {pad}: a VTA LOAD pads at most {MAX_PAD} per side, and this lowering "
            f"needs padding ≤ (kernel − 1)·dilation = {window} (no tile of pure padding)"
        )
    return _Shape(
        KIND_C2D,
        m,
        n,
        k,
        conv=conv,
        h=h["axis"],
        w=w["axis"],
        rh=rh["axis"],
        rw=rw["axis"],
        epilogue=epi,
    )


class VTAGemmTiling(Rule):
    """Tile a tensorizable GEMM, batched GEMM or 2-D convolution into VTA tiles (see the
    module docstring).

    Condition: the stage was matched by ``Tensorize`` and is not tiled yet.
    """

    name = "VTA.GemmTiling"

    def __init__(self, limits: VTALimits) -> None:
        self.limits = limits

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.match is not None and not st.level("T")

    def apply(self, ctx: RuleContext, stage: str) -> None:
        lim = self.limits
        shape = _analyse(ctx, stage, lim)
        st = ctx.states[stage]
        ext = {ax.name: int(ax.extent) for ax in st.stage.axes}
        nb, kb = ext[shape.n] // lim.block_out, ext[shape.k] // lim.block_in
        conv = shape.kind == KIND_C2D
        mb = shape.conv["out_h"] * shape.conv["out_w"] if conv else ext[shape.m]
        if max(mb, nb, kb, *shape.conv.values()) >= 1 << lim.stride_bits:
            raise UnsupportedShapeError(
                f"VTA DMA strides hold {lim.stride_bits} bits: {mb} × {nb} × {kb} blocks is too "
                "large for one program"
            )
        loops = {lp.axis: lp for lp in ctx.loops(stage)}
        csp = ctx.csp
        j_s0, j_v, j_s1, j_t = ctx.split(
            stage, loops[shape.n], ("S0", "V", "S1", "T"), {"T": lim.block_out}
        )
        k_r0, k_r1, k_t = ctx.split(stage, loops[shape.k], ("R0", "R1", "T"), {"T": lim.block_in})
        csp.add(In(str(j_v.extent), tuple(range(1, lim.max_vthreads + 1))))
        order = csp.var(
            f"{stage}.order", 0, 1, knob=True, doc="output-tile order: 0 rows outer, 1 cols outer"
        )
        if conv:
            # the kernel W (CO, KH, KW, CI) as VTA's (CO/16, KH, KW, CI/16, 16, 16) tiles, so the
            # tensorized region is one 16 × 16 block (the host packs weights once, as VTA did)
            b_acc = st.match.b
            tiles = tuple(
                lim.block_out if ax == shape.n else lim.block_in if ax == shape.k else 1
                for ax in b_acc.axes
            )
            layout = PackedLayout(tiles, (b_acc.axes.index(shape.n), b_acc.axes.index(shape.k)))
            ctx.step("transform_layout", ctx.block(stage), b_acc.buffer, layout)
            if b_acc.buffer in {p.name for p in ctx.dag.params}:
                ctx.packed[b_acc.buffer] = layout
            h_s0, h_s1 = ctx.split(stage, loops[shape.h], ("S0", "S1"), {})
            w_s0, w_s1 = ctx.split(stage, loops[shape.w], ("S0", "S1"), {})
            outer_m: tuple = (h_s0, w_s0)
            inner = (k_r1, loops[shape.rw], loops[shape.rh], h_s1, w_s1, j_s1, j_t, k_t)
            head = (loops[shape.m],)
            tile_m = csp.var(f"{stage}.tile_pixels", 1, mb, doc="output pixels of a tile")
            csp.add(Prod(tile_m, (h_s1.extent, w_s1.extent)))
            fold: str | int = csp.var("vta.fold", 0, 0, doc="no GEMM folding choice for conv")
        else:
            i_s0, i_s1 = ctx.split(stage, loops[shape.m], ("S0", "S1"), {})
            outer_m = (i_s0,)
            inner = (k_r1, i_s1, j_s1, j_t, k_t)
            head = (loops[shape.batch_axis],) if shape.batch_axis else ()
            tile_m = i_s1.extent
            fold = csp.var(
                f"{stage}.fold", 0, 1, knob=True, doc="GEMM rows as iter_in (1) or micro-ops (0)"
            )
        orders = (
            (*head, *outer_m, j_s0, j_v, k_r0, *inner),
            (*head, j_s0, *outer_m, j_v, k_r0, *inner),
        )
        ctx.step("reorder", Choice(order, tuple(tuple(Sym(lp.sym) for lp in o) for o in orders)))
        st.loops = list(orders[0])
        ctx.step("annotate", Sym(j_v.sym), "vta.virtual_thread", 1)
        epi = shape.epilogue
        if epi is not None:
            # the epilogue runs on the finished output tile of each thread (its ALU work)
            ctx.step("reverse_compute_at", ctx.block(epi.stage), Sym(j_v.sym))
        # aliases the code generator reads (knobs stay the split parts)
        alias: dict[str, str] = {
            "tile_m": str(tile_m),
            "tile_n": str(j_s1.extent),
            "tile_k": str(k_r1.extent),
            "vthreads": str(j_v.extent),
            "order": order,
        }
        if conv:
            alias["tile_h"], alias["tile_w"] = str(h_s1.extent), str(w_s1.extent)
        if fold != "vta.fold":
            alias["fold"] = str(fold)
        for name, var in alias.items():
            hi = csp.vars[var].hi
            csp.var(f"vta.{name}", 0 if name in ("order", "fold") else 1, hi, doc=f"= {var}")
            csp.add(Eq(f"vta.{name}", var))
        consts = {
            "m_blocks": mb,
            "n_blocks": nb,
            "k_blocks": kb,
            "kind": shape.kind,
            "batch": shape.batch,
            **shape.conv,
            **(epi.constants() if epi is not None else {}),
        }
        for name, value in consts.items():
            csp.var(f"vta.{name}", value, value, doc="compute constant")
        names = PARAMS + (CONV_PARAMS if conv else ())
        if epi is not None:
            names += tuple(c for c in epi.constants() if c not in names)
        st.extra["vta"] = {name: f"vta.{name}" for name in names}


class VTABufferLimits(ConstraintRule):
    """C5 and C6 for VTA: buffer capacities (× virtual threads), micro-op buffer, instruction
    field widths and the accumulator hazard (see the module docstring)."""

    name = "VTA.BufferLimits"

    def __init__(self, limits: VTALimits) -> None:
        self.limits = limits

    def constrain(self, ctx: RuleContext) -> None:
        lim, csp = self.limits, ctx.csp
        if not any("vta" in st.extra for st in ctx.states.values()):
            return
        tm, tn, tk, vt, fold = (
            "vta.tile_m",
            "vta.tile_n",
            "vta.tile_k",
            "vta.vthreads",
            "vta.fold",
        )
        conv = csp.vars["vta.kind"].lo == KIND_C2D
        hi = {v: csp.vars[v].hi for v in (tm, tn, tk, vt)}

        def prod(name: str, factors: tuple[str | int, ...], doc: str) -> str:
            upper = 1
            for f in factors:
                upper *= f if isinstance(f, int) else csp.vars[f].hi
            csp.var(name, 1, max(upper, 1), doc=doc)
            csp.add(Prod(name, factors))
            return name

        if conv:
            c = {k: csp.vars[f"vta.{k}"].lo for k in CONV_PARAMS if not k.startswith("tile")}
            taps = c["kernel_h"] * c["kernel_w"]
            window: list[str] = []
            for axis, kext in (("h", c["kernel_h"]), ("w", c["kernel_w"])):
                name = f"vta.in_tile_{axis}"
                # (tile − 1)·stride + (K − 1)·dilation + 1
                const = (kext - 1) * c["dilation"] + 1 - c["stride"]
                top = csp.vars[f"vta.tile_{axis}"].hi * c["stride"] + const
                csp.var(name, 1, max(top, 1), doc="input rows/cols a tile reads")
                csp.add(Sum(name, (f"vta.tile_{axis}", 1), (c["stride"], const)))
                window.append(name)
            in_win = prod("vta.in_window", tuple(window), "input window elements per channel")
            # src_factor_out = in_window (input index width)
            csp.add(Le(in_win, (1 << lim.inp_index_bits) - 1))
            inp_factors: tuple[str | int, ...] = (vt, tk, in_win, lim.inp_elem_bytes)
            wgt_factors: tuple[str | int, ...] = (vt, tn, tk, taps, lim.wgt_elem_bytes)
            csp.add(Le(taps, (1 << lim.wgt_index_bits) - 1))  # wgt_factor_out = KH·KW
            iterations = taps  # the GEMM loops run tile_k · KH · KW iterations
        else:
            inp_factors = (vt, tm, tk, lim.inp_elem_bytes)
            wgt_factors = (vt, tn, tk, lim.wgt_elem_bytes)
            iterations = 1
        bias = "vta.bias" in csp.vars and csp.vars["vta.bias"].lo == 1
        acc_factors: tuple[str | int, ...] = (vt, tm, tn, lim.acc_elem_bytes)
        if bias:  # the bias tile (tile_n elements) sits beside each thread's output tile
            rows = csp.var("vta.acc_rows", 2, hi[tm] + 1, doc="output rows + the bias row")
            csp.add(Sum(rows, (tm, 1)))
            acc_factors = (vt, rows, tn, lim.acc_elem_bytes)
        for name, factors, cap in (
            ("vta.inp_bytes", inp_factors, lim.inp_bytes),
            ("vta.wgt_bytes", wgt_factors, lim.wgt_bytes),
            ("vta.acc_bytes", acc_factors, lim.acc_bytes),
        ):
            csp.add(Le(prod(name, factors, "bytes live in the buffer, all threads"), cap))
        out_tile = prod("vta.acc_tile", (tm, tn), "accumulator elements of one thread's tile")
        # accumulator hazard (module docstring): (iterations − 1)·(distance − acc_tile) ≤ 0
        k_hi = hi[tk] * iterations
        csp.var("vta.gemm_repeats", 0, k_hi - 1, doc="GEMM loop iterations − 1")
        csp.add(Sum("vta.gemm_repeats", (tk, 1), (iterations, -1)))
        short_lo = lim.hazard_distance - hi[tm] * hi[tn]
        csp.var("vta.hazard_short", short_lo, lim.hazard_distance - 1, doc="distance − acc_tile")
        csp.add(Sum("vta.hazard_short", (lim.hazard_distance, out_tile), (1, -1)))
        lo_h = min(0, (k_hi - 1) * short_lo)
        csp.var("vta.hazard", lo_h, (k_hi - 1) * (lim.hazard_distance - 1), doc="≤ 0: no hazard")
        csp.add(Prod("vta.hazard", ("vta.gemm_repeats", "vta.hazard_short")))
        csp.add(Le("vta.hazard", 0))
        # micro-ops resident at once: per thread one GEMM kernel (tile_m·tile_n micro-ops, or
        # tile_n folded; C2D KH·tile_m·tile_n), one ALU kernel (tile_m·tile_n) and, with a
        # bias, the bias-add kernel (tile_n micro-ops, rows folded into iter_out)
        gemm_uops = csp.var(
            "vta.gemm_uops", 1, hi[tm] * hi[tn] * max(1, iterations), doc="GEMM kernel micro-ops"
        )
        if conv:
            csp.add(Prod(gemm_uops, (c["kernel_h"], out_tile)))
        else:
            csp.add(Select(gemm_uops, fold, (out_tile, tn)))
        per_thread = csp.var(
            "vta.thread_uops",
            1,
            csp.vars[gemm_uops].hi + hi[tm] * hi[tn] + (hi[tn] if bias else 0),
            doc="micro-ops/thread",
        )
        csp.add(Sum(per_thread, (gemm_uops, out_tile, tn) if bias else (gemm_uops, out_tile)))
        csp.add(Le(prod("vta.uops", (vt, per_thread), "micro-ops resident"), lim.uop_depth))
        # instruction fields: GEMM iter_out = tile_k, iter_in = tile_m when folded, and the
        # folded loop's factors dst_factor_in = tile_n (ACC index), src_factor_in = tile_k (INP)
        iter_max = (1 << lim.loop_iter_bits) - 1
        csp.add(Le(tk, iter_max))
        csp.add(Le(tm, iter_max))
        csp.add(Le(tn, (1 << lim.acc_index_bits) - 1))
        csp.add(Le(tk, (1 << lim.inp_index_bits) - 1))
        # DMA sizes: rows and row lengths of every load and store
        size_max = (1 << lim.stride_bits) - 1
        for v in (tm, tn, tk):
            csp.add(Le(v, size_max))
