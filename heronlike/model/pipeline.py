"""Relax passes from an imported model to fused TIR, and from scheduled TIR to a VM executable.

:func:`fuse` is TVM's own operator-fusion pipeline (the passes of
``tvm.relax.backend.cpu_generic.pipeline.legalize_passes``, preceded by
``DecomposeOpsForInference``), with two additions: convolutions are converted to the layout the
target's rules want (``ConvertLayout`` to NHWC / OHWI for DL Boost, whose intrinsic needs the
output channels innermost; ``llvm`` keeps the model's layout), and reshapes become views
(``RewriteDataflowReshape``) so they are never kernels. Every PrimFunc left is a task
(:mod:`heronlike.model.tasks`).

:func:`build` lowers a module whose PrimFuncs are already scheduled: the CPU backend's dataflow
lowering and finalisation passes (``cpu_generic.pipeline``; imported from there, since 0.27's
``relax.pipeline.dataflow_lower_passes`` does not dispatch to it), compiled with heronlike's full
target (``-mcpu``, ``-num-cores``): a VNNI kernel compiled for plain ``llvm`` aborts LLVM.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import relax
from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline

from ..target import DLATarget

__all__ = ["build", "fuse", "wants_channels_last"]


def wants_channels_last(target: DLATarget) -> bool:
    """Whether ``target``'s rules need NHWC activations and OHWI weights for convolutions (the
    intrinsic's n axis on the output channels, k on the input channels)."""
    return bool(target.requires_intrinsic and target.intrinsics)


def fuse(mod: tvm.IRModule, target: DLATarget) -> tvm.IRModule:
    """Legalize and fuse ``mod`` into PrimFuncs (one per fused group), under ``target``.

    Args:
        mod: a Relax ``IRModule`` with a ``main`` (:mod:`heronlike.model.importers`).
        target: the heronlike target; its ``tvm_target()`` is the pass context's target.

    Returns:
        The fused module: ``main`` calls PrimFuncs through ``R.call_tir``; constants folded;
        reshapes are views.
    """
    passes: list[Any] = [
        # batch norms of inference into the convolutions' weights and a bias (as ONNX Runtime
        # and PyTorch's freezing do), before they are decomposed into element-wise stages
        relax.transform.FoldBatchnormToConv2D(),
        relax.transform.FoldConstant(),
        relax.transform.DecomposeOpsForInference(),
    ]
    if wants_channels_last(target):
        layouts = {
            "relax.nn.conv2d": ["NHWC", "OHWI"],
            "relax.nn.conv1d": ["NWC", "OWI"],
        }
        passes += [relax.transform.ConvertLayout(layouts)]
    passes += [
        relax.transform.CanonicalizeBindings(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.RewriteDataflowReshape(),
        relax.transform.DeadCodeElimination(),
    ]
    with tvm.target.Target(target.tvm_target()):
        return tvm.transform.Sequential(passes)(mod)


def build(mod: tvm.IRModule, target: DLATarget) -> Any:
    """Compile a fused module whose PrimFuncs are scheduled into a ``relax.VMExecutable``.

    Raises:
        tvm.error.TVMError: from TVM's lowering (callers turn it into a typed error).
    """
    tgt = tvm.target.Target(target.tvm_target())
    passes = cpu_pipeline.dataflow_lower_passes(tgt) + cpu_pipeline.finalize_passes(tgt)
    with tgt:
        return relax.build(mod, target=tgt, relax_pipeline=tvm.transform.Sequential(passes))
