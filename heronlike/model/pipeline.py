"""Relax passes from an imported model to fused TIR, and from scheduled TIR to a VM executable.

:func:`fuse` is TVM's own operator-fusion pipeline (the passes of
``tvm.relax.backend.cpu_generic.pipeline.legalize_passes``, preceded by
``DecomposeOpsForInference``), with three additions: inference batch norms are folded into the
convolutions (``FoldBatchnormToConv2D``), convolutions are converted to the layout heronlike's
rules are written for (``ConvertLayout`` to NHWC / OHWI, :data:`CONV_LAYOUTS`), and reshapes
become views (``RewriteDataflowReshape``) so they are never kernels; with ``fast_math`` (the
default) GELU is spelt out with ``erf`` (:func:`decompose_gelu`) and ``exp`` / ``erf`` / ``tanh``
/ ``softmax`` take TVM's vectorisable approximations (``FastMathTransform``). Every PrimFunc
left is a task (:mod:`heronlike.model.tasks`).

:func:`build` lowers a module whose PrimFuncs are already scheduled: the CPU backend's dataflow
lowering and finalisation passes (``cpu_generic.pipeline``; imported from there, since 0.27's
``relax.pipeline.dataflow_lower_passes`` does not dispatch to it), compiled with heronlike's full
target (``-mcpu``, ``-num-cores``): a VNNI kernel compiled for plain ``llvm`` aborts LLVM.
"""

from __future__ import annotations

import json
from typing import Any

import tvm
from tvm import relax
from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline

from ..errors import TVM_ERRORS, HeronlikeError, ModelCompileError
from ..target import DLATarget
from .quantize import QUANTIZE_ATTR, describe, rewrite_qdq

__all__ = ["CONV_LAYOUTS", "build", "decompose_gelu", "fuse"]


#: the layouts convolutions are converted to: heronlike's rules are written for channels-last
#: activations and output-channel-major, input-channel-innermost weights (the convention of
#: :mod:`heronlike.ops` on every target). DL Boost needs them (the intrinsic's n axis on the
#: output channels, k on the input channels); on ``llvm`` they vectorise over channels instead
#: of the image width (a 1x64x56x56 3x3 convolution: 108 GFLOP/s NHWC against 31 NCHW after the
#: same 48 trials on a 2-core Zen 3)
CONV_LAYOUTS = {
    "relax.nn.conv2d": ["NHWC", "OHWI"],
    "relax.nn.conv1d": ["NWC", "OWI"],
}


@relax.expr_functor.mutator
class _GeluDecomposer(relax.PyExprMutator):
    """``nn.gelu(x)`` -> ``x * (0.5 + 0.5 * erf(x / sqrt 2))`` (the exact GELU, as PyTorch's
    default and ONNX's opset-17 export write it), in Relax operators."""

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's name
        call = super().visit_call_(call)
        if getattr(call.op, "name", "") != "relax.nn.gelu":
            return call
        x = call.args[0]
        dtype = str(x.ty.dtype)
        half = relax.const(0.5, dtype)
        scaled = relax.op.multiply(x, relax.const(0.5**0.5, dtype))
        erf = relax.op.erf(scaled)
        return relax.op.multiply(x, relax.op.add(half, relax.op.multiply(erf, half)))


def decompose_gelu(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every ``relax.nn.gelu`` (what TVM's PyTorch frontend makes of GELU) written
    with ``erf``, so that the fast-math pass reaches it; without it GELU legalizes to one scalar
    libm ``erff`` call per element. (Whether it then fuses into the producing matmul is
    FuseOps' call: behind a reshape, as in TVM's import of a 3-D ``Linear``, it does not.)
    """
    mutator = _GeluDecomposer(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def fuse(mod: tvm.IRModule, target: DLATarget, *, fast_math: bool = True) -> tvm.IRModule:
    """Legalize and fuse ``mod`` into PrimFuncs (one per fused group), under ``target``.

    Args:
        mod: a Relax ``IRModule`` with a ``main`` (:mod:`heronlike.model.importers`).
        target: the heronlike target; its ``tvm_target()`` is the pass context's target.
        fast_math: replace ``exp``, ``erf``, ``tanh`` and ``softmax`` by TVM's vectorisable
            polynomial approximations (``topi.fast_exp`` / ``fast_erf`` / ``fast_tanh`` /
            ``fast_softmax``, Relax's ``FastMathTransform``), as ONNX Runtime's and PyTorch's
            CPU kernels use their own; without it LLVM calls libm's scalar ``erff`` / ``expf``
            per element (BERT-base's int8 FFN kernel with its GELU, tuned, on a 2-core Zen 3:
            14.6 ms with ``erff``, 7.2 ms with ``fast_erf``).

    Quantized layers in QDQ form become integer compute first (:func:`~heronlike.model.quantize.
    rewrite_qdq`); what was rewritten and what stayed float is the module attribute
    :data:`~heronlike.model.quantize.QUANTIZE_ATTR` (JSON), when the model has any.

    Returns:
        The fused module: ``main`` calls PrimFuncs through ``R.call_tir``; constants folded;
        reshapes are views.

    Raises:
        ModelCompileError: a Relax pass failed (e.g. an operator without a legalization).
    """
    passes: list[Any] = [
        # batch norms of inference into the convolutions' weights and a bias (as ONNX Runtime
        # and PyTorch's freezing do), before they are decomposed into element-wise stages
        relax.transform.FoldBatchnormToConv2D(),
        relax.transform.FoldConstant(),
        relax.transform.DecomposeOpsForInference(),
        relax.transform.ConvertLayout(CONV_LAYOUTS),
        relax.transform.CanonicalizeBindings(),
        *([relax.transform.FastMathTransform()] if fast_math else []),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.RewriteDataflowReshape(),
        relax.transform.DeadCodeElimination(),
    ]
    try:
        mod, report = rewrite_qdq(mod)
        if fast_math:
            mod = decompose_gelu(mod)
        with tvm.target.Target(target.tvm_target()):
            out = tvm.transform.Sequential(passes)(mod)
    except HeronlikeError:
        raise
    except TVM_ERRORS as exc:
        raise ModelCompileError(f"Relax's fusion pipeline failed: {_last_lines(exc)}") from exc
    if report.rewritten or report.kept_float:
        out = out.with_attr(QUANTIZE_ATTR, json.dumps(describe(report)))
    return out


def build(mod: tvm.IRModule, target: DLATarget) -> Any:
    """Compile a fused module whose PrimFuncs are scheduled into a ``relax.VMExecutable``.

    Raises:
        ModelCompileError: TVM's lowering or code generation failed.
    """
    tgt = tvm.target.Target(target.tvm_target())
    passes = cpu_pipeline.dataflow_lower_passes(tgt) + cpu_pipeline.finalize_passes(tgt)
    try:
        with tgt:
            return relax.build(mod, target=tgt, relax_pipeline=tvm.transform.Sequential(passes))
    except HeronlikeError:
        raise
    except TVM_ERRORS as exc:
        raise ModelCompileError(f"building the model failed: {_last_lines(exc)}") from exc


def _last_lines(exc: BaseException, n: int = 3) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:]) or type(exc).__name__
