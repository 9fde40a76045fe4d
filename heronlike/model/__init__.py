"""Models in, compiled models out: import a PyTorch, ONNX or Relax model, tune its tasks, compile.

    import heronlike.model as hm
    mod = hm.from_torch(net, (x,))                      # or hm.from_onnx("net.onnx")
    result = hm.tune_model(mod, "llvm", trials=200, records="net.sqlite")
    compiled = hm.compile_model(mod, "llvm", "net.sqlite")
    y = compiled(x.numpy()); compiled.export_library("net.so"); hm.load("net.so")

Data flow: model → :mod:`~heronlike.model.importers` (Relax ``IRModule``) →
:mod:`~heronlike.model.pipeline` (fused TIR) → :mod:`~heronlike.model.tasks` (one task per
distinct PrimFunc) → :mod:`~heronlike.model.tuning` (the task scheduler over heronlike's tuning
sessions, records) → :mod:`~heronlike.model.compile` (scheduled PrimFuncs substituted, built).
"""

from __future__ import annotations

from .compile import CompiledModel, InputSpec, KernelChoice, compile_model, load
from .importers import as_relax, bind_shapes, from_onnx, from_torch
from .profile import CallTime, ModelProfile, profile_model
from .tasks import ModelTask, extract_tasks
from .tuning import ModelTuneResult, tune_model

__all__ = [
    "CallTime",
    "CompiledModel",
    "InputSpec",
    "KernelChoice",
    "ModelProfile",
    "ModelTask",
    "ModelTuneResult",
    "as_relax",
    "bind_shapes",
    "compile_model",
    "extract_tasks",
    "from_onnx",
    "from_torch",
    "load",
    "profile_model",
    "tune_model",
]
